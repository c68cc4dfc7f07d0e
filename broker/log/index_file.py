"""Sparse index files: fixed-size big-endian entries, mirrored in memory for binary search.

`.index` maps offset -> file position and `.timeindex` maps timestamp -> offset, one entry
each `index_interval_bytes` of log written. Entries live in compact in-memory arrays (a 1 GiB
segment at 4 KiB intervals has ~262k entries, 4 MiB) and are appended to the file as they are
made; the file is only read when the segment is opened. New entries reach the file when the
segment is flushed, rolled or closed, not one write per entry: after a crash the active
segment's indexes are rebuilt from the log anyway, and a missing tail entry would be harmless
(lookups fall back to the previous entry and scan forward).
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from array import array
from pathlib import Path
from typing import BinaryIO

from broker.log.errors import CorruptIndexError

__all__ = ["IndexFile", "non_decreasing", "strictly_increasing"]


class IndexFile:
    """Entries (key, value), keys increasing; stored as `entry` structs of two integers."""

    def __init__(self, path: Path, entry: struct.Struct, key_base: int, max_bytes: int) -> None:
        self.path = path
        self._entry = entry
        self._key_base = key_base  # stored keys are relative to this (the segment base offset)
        self.max_entries = max(1, max_bytes // entry.size)
        self.keys: array[int] = array("q")
        self.values: array[int] = array("q")
        # len(keys) >= max_entries, kept by every change: a plain attribute, because the
        # segment's roll check reads it on every append.
        self.is_full = False
        self._persisted = 0  # entries already in the file
        self._file: BinaryIO = open(path, "a+b")  # noqa: SIM115 - lives as long as the segment

    # -- loading -------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file into memory; raise CorruptIndexError if it fails its sanity check."""
        self._file.seek(0)
        data = self._file.read()
        if len(data) % self._entry.size:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {self._entry.size}"
            )
        keys: array[int] = array("q")
        values: array[int] = array("q")
        for key, value in self._entry.iter_unpack(data):
            keys.append(key + self._key_base)
            values.append(value)
        self._check(keys, values)
        self.keys, self.values = keys, values
        self.is_full = len(keys) >= self.max_entries
        self._persisted = len(keys)

    def _check(self, keys: array[int], values: array[int]) -> None:
        """Subclasses raise CorruptIndexError for entries that break their ordering rules."""

    # -- queries -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.keys)

    def floor(self, key: int) -> int:
        """Index of the last entry with entry key <= key, or -1."""
        return bisect.bisect_right(self.keys, key) - 1

    # -- changes -------------------------------------------------------------------------

    def _append(self, key: int, value: int) -> None:
        keys = self.keys
        keys.append(key)
        self.values.append(value)
        self.is_full = len(keys) >= self.max_entries

    def _write_pending(self) -> None:
        pack = self._entry.pack
        base = self._key_base
        keys, values = self.keys, self.values
        self._file.write(
            b"".join(pack(keys[i] - base, values[i]) for i in range(self._persisted, len(keys)))
        )
        self._persisted = len(keys)

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries."""
        # The file is cut even when memory holds fewer entries: after a failed load() the
        # file still has the bytes that failed the check.
        del self.keys[count:]
        del self.values[count:]
        self.is_full = len(self.keys) >= self.max_entries
        self._persisted = min(self._persisted, count)
        self._file.flush()
        self._file.truncate(self._persisted * self._entry.size)

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        self._write_pending()
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._write_pending()
            self._file.flush()
            self._file.close()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        self._write_pending()
        self._file.flush()
        os.replace(self.path, path)
        self.path = path


def strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def non_decreasing(values: array[int]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(values))
