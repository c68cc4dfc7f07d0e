"""Rewrite Example B of docs/protocol.md §8 (the ApiVersions response) from the API table:
`python -m tests.unit.protocol.spec_example_b` after adding an API or a version."""

from __future__ import annotations

import re
from pathlib import Path

from protocol.apis import supported_versions
from protocol.codec import encode_response
from protocol.messages.api_versions import ApiVersionsResponse

SPEC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def hex_dump(data: bytes) -> str:
    return "\n".join(
        f"{i:04x}  " + " ".join(f"{b:02x}" for b in data[i : i + 16])
        for i in range(0, len(data), 16)
    )


def main() -> None:
    apis = supported_versions()
    data = encode_response(1, 18, 0, ApiVersionsResponse(0, apis))
    text = SPEC.read_text()
    start = text.index("### Example B:")
    end = text.index("### Example C:")
    section = text[start:end]
    section = re.sub(
        r"full list of supported APIs \(\d+ entries\)\. \d+ bytes:",
        f"full list of supported APIs ({len(apis)} entries). {len(data)} bytes:",
        section,
    )
    section = re.sub(r"```hex\n.*?```", f"```hex\n{hex_dump(data)}\n```", section, flags=re.S)
    n, size = len(apis), len(data)
    throttle_at = size - 18  # the key "throttle_time_ms" (17 bytes) and its fixint value
    prefix = " ".join(f"{b:02x}" for b in data[:4])
    section = re.sub(
        r"    0  [0-9a-f ]{11}( +)length prefix: int32 \d+",
        lambda m: f"    0  {prefix}{m[1]}length prefix: int32 {size - 4}",
        section,
    )
    section = re.sub(
        r"dc 00 [0-9a-f]{2}( +)array 16, \d+ items",
        lambda m: f"dc 00 {n:02x}{m[1]}array 16, {n} items",
        section,
    )
    section = re.sub(
        r"\(\d+ more ApiVersionRange maps, through offset \d+\)",
        f"({n - 1} more ApiVersionRange maps, through offset {throttle_at - 1})",
        section,
    )
    section = re.sub(
        r"\n *\d+  b0 74 68 72 6f 74 74 6c 65 5f 74 69",
        f"\n{throttle_at:5d}  b0 74 68 72 6f 74 74 6c 65 5f 74 69",
        section,
    )
    section = re.sub(
        r"\n *\d+  00( +)positive fixint 0\n```",
        lambda m: f"\n{size - 1:5d}  00{m[1]}positive fixint 0\n```",
        section,
    )
    keys = [str(a.api_key) for a in apis]
    above = [a for a in apis if a.max_version > 0]
    names = ", ".join(f"{a.api_key}" for a in above)
    section = re.sub(
        r"The \d+ entries are, in order, keys .*?, as in §5\.0\.",
        f"The {n} entries are, in order, keys {', '.join(keys[:-1])} and {keys[-1]}, as in §5.0.",
        section,
        flags=re.S,
    )
    print(f"(max_version above 0: keys {names}: check the sentence after the dump)")
    SPEC.write_text(text[:start] + section + text[end:])
    print(f"Example B: {len(apis)} APIs, {len(data)} bytes")


if __name__ == "__main__":
    main()
