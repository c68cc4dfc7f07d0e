"""`.index`: relative offset (int32) -> position in the .log file (int32), 8 bytes an entry."""

from __future__ import annotations

import struct
from array import array
from pathlib import Path
from typing import Final

from broker.log.errors import CorruptIndexError
from broker.log.index_file import IndexFile, strictly_increasing

__all__ = ["OffsetIndex"]

_ENTRY: Final = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, _ENTRY, base_offset, max_bytes)
        self.base_offset = base_offset

    def _check(self, keys: array[int], values: array[int]) -> None:
        if keys and keys[0] < self.base_offset:
            raise CorruptIndexError(f"{self.path}: offset {keys[0]} below the segment base")
        if not (strictly_increasing(keys) and strictly_increasing(values)):
            raise CorruptIndexError(f"{self.path}: entries are not strictly increasing")
        if values and values[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative position")

    def append(self, offset: int, position: int) -> None:
        keys = self.keys
        if keys and (offset <= keys[-1] or position <= self.values[-1]):
            raise ValueError(f"index entry ({offset}, {position}) not after the last one")
        keys.append(offset)
        self.values.append(position)
        self.is_full = len(keys) >= self.max_entries

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) if none."""
        i = self.floor(offset)
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def last_position(self) -> int:
        return self.values[-1] if self.values else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        self.truncate_entries(self.floor(offset - 1) + 1)
