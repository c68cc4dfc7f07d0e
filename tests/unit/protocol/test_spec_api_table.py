"""docs/protocol.md §5.0's API table is the broker's: every API of protocol.apis with its
versions, each row pointing at the section that specifies that API (Example B of §8 says its
keys are "as in §5.0")."""

from __future__ import annotations

import re
from pathlib import Path

from protocol.apis import supported_versions

SPEC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
_DASH = "\u2013"  # the spec writes version ranges with an en dash (U+2013)
_ROW = re.compile(rf"^\| (\w+) \| (\d+) \| (\d+)(?:{_DASH}(\d+))? \| [^|]+ \| §(5\.\d+) \|$")


def _table() -> dict[int, tuple[str, int, int, str]]:
    """api key -> (name, min version, max version, section) from §5.0's table."""
    text = SPEC.read_text()
    section = text[text.index("### 5.0 API table") : text.index("Version differences:")]
    rows: dict[int, tuple[str, int, int, str]] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            name, key, low, high, where = match.groups()
            assert int(key) not in rows, f"key {key} listed twice"
            rows[int(key)] = (name, int(low), int(high or low), where)
    return rows


def test_the_api_table_lists_every_api_with_its_versions() -> None:
    table = _table()
    broker = {int(a.api_key): (a.min_version, a.max_version) for a in supported_versions()}
    assert {k: (low, high) for k, (_, low, high, _) in table.items()} == broker


def test_each_row_points_at_its_apis_section() -> None:
    text = SPEC.read_text()
    for key, (name, low, high, where) in _table().items():
        versions = f"v{low}" if low == high else f"v{low}[{_DASH}-]v?{high}"
        heading = rf"^### {re.escape(where)} {name} \(key {key}, {versions}\)"
        assert re.search(heading, text, flags=re.M), f"no section '{where} {name} (key {key})'"


def test_the_rows_are_in_key_order() -> None:
    keys = list(_table())
    assert keys == sorted(keys)
