"""No merge-conflict markers in the docs or the Makefile (ruff catches them in Python only)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_MARKER = re.compile(r"^(<<<<<<< |>>>>>>> |\|\|\|\|\|\|\| )", re.MULTILINE)


def test_docs_and_makefile_hold_no_conflict_markers() -> None:
    files = [*ROOT.glob("docs/**/*.md"), ROOT / "README.md", ROOT / "Makefile"]
    marked = [str(f.relative_to(ROOT)) for f in files if _MARKER.search(f.read_text("utf-8"))]
    assert marked == []
