"""Damage a stopped broker's files the way crashes and bad disks do, for crash-recovery tests.

Each helper changes one file (or one partition directory) of a broker that is not running,
takes every random choice from a `random.Random` the test seeded and printed, and returns a
short description of what it did, for the test's output. Every fault is one the broker must
detect with its own checks: the CRC-32C of a batch, the sanity checks of `.index` and
`.timeindex` files, the strict reads of checkpoints and producer snapshots. (A batch's first
16 bytes, base offset, length and leader epoch, are outside its CRC, as in Kafka: flip bits
from byte 16 on to damage what the CRC protects.)

The readers here follow recovery's rules, so a test can say in advance which prefix of a
damaged log the broker must keep: `batch_spans` stops at the first torn or corrupt batch,
`recovered_log_end` at the first segment with a bad tail (recovery deletes later segments).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Final

from protocol.errors import HighwaterError
from protocol.records import BatchHeader, decode_batch, read_header, validate_batch

__all__ = [
    "INDEX_ENTRY_BYTES",
    "append_garbage",
    "batch_spans",
    "corrupt_checkpoint",
    "corrupt_index",
    "corrupt_snapshot",
    "cut_at",
    "delete_index_files",
    "flip_bits",
    "recovered_log_end",
    "recovered_values",
    "segment_files",
    "snapshot_files",
]

INDEX_ENTRY_BYTES: Final = {".index": 8, ".timeindex": 12}
_MAX_GARBAGE_BYTES: Final = 64


# -- reading as recovery does ----------------------------------------------------------------


def segment_files(partition_dir: Path, suffix: str = ".log") -> list[Path]:
    """The partition's segment files with `suffix`, in offset order (20-digit names)."""
    return sorted(partition_dir.glob(f"{'[0-9]' * 20}{suffix}"))


def snapshot_files(partition_dir: Path) -> list[Path]:
    """The partition's producer `.snapshot` files, oldest first."""
    return segment_files(partition_dir, ".snapshot")


def batch_spans(path: Path) -> tuple[list[tuple[int, BatchHeader]], int]:
    """((position, header) of each valid batch from the start of a segment file, the file
    size). The batches stop at the first torn or corrupt one, as recovery's scan does."""
    data = path.read_bytes()
    spans: list[tuple[int, BatchHeader]] = []
    position = 0
    while position < len(data):
        try:
            header = read_header(data, position)
            validate_batch(data, position, header)
        except HighwaterError:
            break
        spans.append((position, header))
        position += header.size
    return spans, len(data)


def recovered_log_end(partition_dir: Path) -> int:
    """The log end offset recovery must find: the end of the valid batches, segment by
    segment, up to the first segment with a bad tail (the ones after it are deleted)."""
    end = 0
    for path in segment_files(partition_dir):
        spans, size = batch_spans(path)
        end = spans[-1][1].next_offset if spans else int(path.stem)
        valid_bytes = spans[-1][0] + spans[-1][1].size if spans else 0
        if valid_bytes < size:
            break
    return end


def recovered_values(partition_dir: Path) -> list[bytes | None]:
    """The record values recovery must keep, in offset order (see `recovered_log_end`)."""
    values: list[bytes | None] = []
    for path in segment_files(partition_dir):
        data = path.read_bytes()
        spans, size = batch_spans(path)
        for position, _ in spans:
            values.extend(record.value for record in decode_batch(data, position).records)
        valid_bytes = spans[-1][0] + spans[-1][1].size if spans else 0
        if valid_bytes < size:
            break
    return values


# -- damaging log segments -------------------------------------------------------------------


def cut_at(path: Path, byte: int) -> int:
    """A torn tail: keep the file's first `byte` bytes. Returns how many bytes were cut."""
    size = path.stat().st_size
    if not 0 <= byte <= size:
        raise ValueError(f"cannot cut {path} ({size} bytes) at byte {byte}")
    with path.open("r+b") as f:
        f.truncate(byte)
    return size - byte


def flip_bits(path: Path, start: int, end: int, rng: random.Random, count: int = 1) -> list[int]:
    """Flip `count` distinct bits among bytes [start, end) of the file. Returns the flipped
    bits' positions (byte * 8 + bit), ascending."""
    if not 0 <= start < end <= path.stat().st_size:
        raise ValueError(f"bytes [{start}, {end}) are not inside {path}")
    bits = sorted(rng.sample(range(start * 8, end * 8), count))
    data = bytearray(path.read_bytes())
    for bit in bits:
        data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))
    return bits


def append_garbage(path: Path, n: int, rng: random.Random) -> bytes:
    """Append `n` random bytes (what a disk may leave past the last good write)."""
    garbage = rng.randbytes(n)
    with path.open("ab") as f:
        f.write(garbage)
    return garbage


# -- damaging indexes ------------------------------------------------------------------------


def delete_index_files(partition_dir: Path, suffix: str) -> list[Path]:
    """Delete every segment's `suffix` index (".index" or ".timeindex"); the paths deleted."""
    doomed = segment_files(partition_dir, suffix)
    for path in doomed:
        path.unlink()
    return doomed


def corrupt_index(path: Path, rng: random.Random) -> str:
    """Damage an `.index` or `.timeindex` so that its sanity check fails: a size that is not
    a whole number of entries, or two entries out of order."""
    entry_bytes = INDEX_ENTRY_BYTES[path.suffix]
    data = path.read_bytes()
    entries = len(data) // entry_bytes
    modes = ["odd-size", "torn-entry", "swapped"] if entries >= 2 else ["odd-size", "torn-entry"]
    if not data:
        modes = ["odd-size"]
    mode = rng.choice(modes)
    if mode == "odd-size":
        extra = rng.randbytes(rng.randrange(1, entry_bytes))
        path.write_bytes(data + extra)
        return f"{path.name}: {len(extra)} stray bytes appended"
    if mode == "torn-entry":
        keep = len(data) - rng.randrange(1, entry_bytes)
        path.write_bytes(data[:keep])
        return f"{path.name}: cut to {keep} bytes, inside an entry"
    i = rng.randrange(entries - 1)
    a, b = (slice(j * entry_bytes, (j + 1) * entry_bytes) for j in (i, i + 1))
    path.write_bytes(data[: a.start] + data[b] + data[a] + data[b.stop :])
    return f"{path.name}: entries {i} and {i + 1} swapped"


# -- damaging checkpoints and snapshots ------------------------------------------------------


def corrupt_checkpoint(path: Path, rng: random.Random) -> str:
    """Damage a text checkpoint (Kafka's format: version, count, entries) so that a strict
    read must refuse it: torn mid-file, random bytes, empty, or an entry count that lies."""
    data = path.read_bytes()
    mode = rng.choice(["torn", "garbage", "empty", "count"])
    if mode == "torn":
        keep = rng.randrange(1, len(data))
        path.write_bytes(data[:keep])
        return f"{path.name}: cut to {keep} of {len(data)} bytes"
    if mode == "garbage":
        garbage = bytearray(rng.randbytes(rng.randrange(1, _MAX_GARBAGE_BYTES)))
        if garbage[-1] == ord("\n"):
            garbage[-1] = 0  # a file not ending in a newline is torn: always refused
        path.write_bytes(bytes(garbage))
        return f"{path.name}: replaced by {len(garbage)} random bytes"
    if mode == "empty":
        path.write_bytes(b"")
        return f"{path.name}: emptied"
    lines = data.split(b"\n")
    lines[1] = b"%d" % (int(lines[1]) + rng.randrange(1, 10))
    path.write_bytes(b"\n".join(lines))
    return f"{path.name}: entry count raised to {lines[1].decode()}"


def corrupt_snapshot(path: Path, rng: random.Random) -> str:
    """Damage a producer `.snapshot` (version, CRC-32C, msgpack body) so that its checks
    refuse it: flipped bits, torn, bytes appended to the body, or zeroed."""
    data = path.read_bytes()
    mode = rng.choice(["flip", "torn", "appended", "zeroed"])
    if mode == "flip":
        bits = flip_bits(path, 0, len(data), rng, count=rng.randint(1, 3))
        return f"{path.name}: bits {bits} flipped"
    if mode == "torn":
        keep = rng.randrange(len(data))
        path.write_bytes(data[:keep])
        return f"{path.name}: cut to {keep} of {len(data)} bytes"
    if mode == "appended":
        extra = append_garbage(path, rng.randrange(1, _MAX_GARBAGE_BYTES), rng)
        return f"{path.name}: {len(extra)} random bytes appended"
    path.write_bytes(bytes(len(data)))
    return f"{path.name}: {len(data)} bytes zeroed"
