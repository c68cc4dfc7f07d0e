"""The documentation never shows a password on a command line: every local user can read it
in the process list (`ps`). `highwater users add` prompts, or reads HIGHWATER_USER_PASSWORD."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_PASSWORD_FLAG = re.compile(r"highwater users add\b[^\n]*--password")


def test_no_documented_users_add_passes_the_password_as_a_flag() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 1
    shown = [
        f"{page.relative_to(ROOT)}: {match.group(0)}"
        for page in pages
        for match in _PASSWORD_FLAG.finditer(page.read_text(encoding="utf-8"))
    ]
    assert shown == []
