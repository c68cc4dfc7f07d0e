"""Types of the compiled twin of columns._pack for the usual records section (_sections.c)."""

def decode_section(
    section: memoryview | bytes, count: int, lo: int, hi: int, /
) -> tuple[bytes, bytes, bytes, bytes, bytes] | None: ...
