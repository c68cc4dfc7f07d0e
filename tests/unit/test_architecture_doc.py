"""docs/architecture.md's tables name files that exist: every module or folder in a table row
("Where does X live", each package's module table) resolves, so a move or rename that forgets
the docs fails here. A bare name resolves against the repository root, the table's package
(its section heading or header cell) or the folder of the path before it in the same row."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
_PATH = re.compile(r"`([\w./<>*-]+(?:\.(?:py|html|md|json|toml|xml|h)|/))`")
_PACKAGE_HEADING = re.compile(r"^#{2,3} ([\w/]+/)\s*$")
_PACKAGE_HEADER_CELL = re.compile(r"^\| `([\w/]+/)` \| purpose")


def _exists(candidate: Path) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", str(candidate.relative_to(ROOT)))
    return any(ROOT.glob(pattern.rstrip("/"))) if "*" in pattern else candidate.exists()


def _unresolved(lines: list[str]) -> list[str]:
    package = ROOT
    missing = []
    for number, line in enumerate(lines, 1):
        if heading := _PACKAGE_HEADING.match(line):
            package = ROOT / heading.group(1)
        elif line.startswith("## "):
            package = ROOT
        if header := _PACKAGE_HEADER_CELL.match(line):
            package = ROOT / header.group(1)
            continue
        if not line.startswith("|") or line.startswith("|---"):
            continue
        previous_dir: Path | None = None
        for name in _PATH.findall(line):
            bases = [ROOT, package] + ([previous_dir] if previous_dir else [])
            found = next((b / name for b in bases if _exists(b / name)), None)
            if found is None:
                missing.append(f"line {number}: `{name}`")
            else:
                previous_dir = found if name.endswith("/") else found.parent
    return missing


def test_every_path_in_the_architecture_tables_exists() -> None:
    assert _unresolved(DOC.read_text(encoding="utf-8").splitlines()) == []


def test_a_moved_module_is_caught() -> None:
    lines = ["## broker/", "| module | purpose |", "|---|---|", "| `no_such_module.py` | gone |"]
    assert _unresolved(lines) == ["line 4: `no_such_module.py`"]
