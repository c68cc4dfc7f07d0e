"""`.timeindex`: timestamp (int64) -> relative offset (int32), 12 bytes an entry.

An entry is added only when the segment's largest timestamp so far grew, so timestamps are
strictly increasing and a lookup finds the first offset that may hold a given time.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from pathlib import Path
from typing import Final

from broker.log.errors import CorruptIndexError
from broker.log.index_file import IndexFile, non_decreasing, strictly_increasing

__all__ = ["TimeIndex"]

_ENTRY: Final = struct.Struct(">qi")


class TimeIndex(IndexFile):
    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        # Keys are timestamps (absolute); values are offsets relative to the segment base.
        super().__init__(path, _ENTRY, 0, max_bytes)
        self.base_offset = base_offset

    def _check(self, keys: array[int], values: array[int]) -> None:
        if not (strictly_increasing(keys) and non_decreasing(values)):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")
        if values and values[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative relative offset")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        keys = self.keys
        if keys and timestamp <= keys[-1]:
            return
        values = self.values
        relative = offset - self.base_offset
        if values and relative < values[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        keys.append(timestamp)
        values.append(relative)
        self.is_full = len(keys) >= self.max_entries

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry at or below `timestamp`; (-1, base) if none."""
        i = self.floor(timestamp)
        if i < 0:
            return -1, self.base_offset
        return self.keys[i], self.values[i] + self.base_offset

    def last_entry(self) -> tuple[int, int]:
        if not self.keys:
            return -1, self.base_offset
        return self.keys[-1], self.values[-1] + self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries pointing at offsets >= `offset`."""
        relative = offset - self.base_offset
        self.truncate_entries(bisect.bisect_left(self.values, relative))
