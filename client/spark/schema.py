"""The source's schema as Spark DDL (no pyarrow: the driver-side runner imports this)."""

from __future__ import annotations

from typing import Final

__all__ = ["SOURCE_NAMES", "source_schema"]

SOURCE_NAMES: Final = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
_BASE_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL: Final = "headers array<struct<key: string, value: binary>>"


def source_schema(include_headers: bool) -> str:
    """The source's schema as a Spark DDL string."""
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL
