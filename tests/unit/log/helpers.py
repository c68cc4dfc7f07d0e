"""Shared helpers for the log-engine tests: batch builders and ways to look at what is on disk."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.log import LEADER_EPOCH_CHECKPOINT_FILE, Log
from protocol.compression import Compression
from protocol.records import (
    BATCH_HEADER_BYTES,
    Record,
    build_batch,
    crc32c,
    decode_batches,
    iter_batch_headers,
    read_header,
    stamp_prefix,
    validate_batch,
)

T0 = 1_700_000_000_000  # a fixed "now" in ms; tests move time by passing now_ms explicitly

# Byte offsets inside a v2 batch header.
ATTRIBUTES_AT = 21
CRC_AT = 17
CRC_START = 21


def make_batch(
    count: int = 1,
    *,
    ts: int = T0,
    step: int = 1,
    timestamps: Sequence[int] | None = None,
    value: bytes = b"value",
    tag: int = 0,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A producer batch of `count` records; record i has timestamp ts + i*step (or
    timestamps[i]) and value `value + tag/i`, so different batches have different bytes."""
    if timestamps is None:
        timestamps = [ts + i * step for i in range(count)]
    assert len(timestamps) == count
    records = [
        Record(value + f"/{tag}/{i}".encode(), key=f"k{tag}".encode(), timestamp_ms=t)
        for i, t in enumerate(timestamps)
    ]
    return build_batch(
        records,
        compression=compression,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        now_ms=T0,
    )


def split_batches(data: bytes) -> list[bytes]:
    """The batches of `data` (whole batches only; CRCs checked)."""
    out = []
    for pos, header in iter_batch_headers(data):
        out.append(data[pos : pos + header.size])
    return out


def rewrite_header(batch: bytes, fmt: str, at: int, value: int, *, fix_crc: bool = True) -> bytes:
    """Overwrite one header field (struct format `fmt`, big-endian) and recompute the CRC."""
    buf = bytearray(batch)
    struct.pack_into(">" + fmt, buf, at, value)
    if fix_crc:
        struct.pack_into(">I", buf, CRC_AT, crc32c(bytes(buf[CRC_START:])))
    return bytes(buf)


def stamped(producer_batch: bytes, base_offset: int, epoch: int) -> bytes:
    """What the leader must store for `producer_batch`: a new 16-byte prefix, the rest as sent."""
    header = read_header(producer_batch)
    return stamp_prefix(base_offset, header.batch_length, epoch) + producer_batch[16:]


def open_log(directory: Path, config: LogConfig | None = None, **kwargs: object) -> Log:
    kwargs.setdefault("now_ms", T0)
    return Log.open(directory, config or LogConfig(), **kwargs)  # type: ignore[arg-type]


def segment_bytes(log: Log) -> list[bytes]:
    """The raw .log file of every segment, in order."""
    return [seg.log_path.read_bytes() for seg in log.segments]


def stored_batches(log: Log) -> list[bytes]:
    """Every stored batch, in order, read straight from the segment files."""
    out: list[bytes] = []
    for data in segment_bytes(log):
        out.extend(split_batches(data))
    return out


def dir_batches(directory: Path) -> list[bytes]:
    """Every batch in the .log files of `directory` (a closed log), in order."""
    out: list[bytes] = []
    for path in sorted(directory.glob("*.log")):
        out.extend(split_batches(path.read_bytes()))
    return out


def seg_file_names(directory: Path) -> list[str]:
    """Names of the segment files (.log, .index, .timeindex) in `directory`."""
    return sorted(
        p.name for p in directory.iterdir() if p.suffix in (".log", ".index", ".timeindex")
    )


def segment_files(*bases: int) -> list[str]:
    return sorted(f"{b:020d}{suffix}" for b in bases for suffix in (".log", ".index", ".timeindex"))


def file_sizes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}


def snapshot(log: Log) -> tuple[object, ...]:
    """Everything an append must not change when it is rejected."""
    directory = log.directory
    checkpoint = directory / LEADER_EPOCH_CHECKPOINT_FILE
    return (
        log.log_end_offset,
        log.log_start_offset,
        log.recovery_point,
        [s.base_offset for s in log.segments],
        tuple(segment_bytes(log)),
        file_sizes(directory),
        log.leader_epoch_cache.entries(),
        checkpoint.read_bytes() if checkpoint.exists() else None,
        [(list(s.offset_index.keys), list(s.offset_index.values)) for s in log.segments],
        [(list(s.time_index.keys), list(s.time_index.values)) for s in log.segments],
    )


def read_bytes(log: Log, offset: int, max_bytes: int = 1 << 30, **kwargs: object) -> bytes:
    return log.read(offset, max_bytes, **kwargs).read()  # type: ignore[arg-type]


def read_headers(log: Log, offset: int, max_bytes: int = 1 << 30, **kwargs: object) -> list:
    """Headers of the whole batches a read returns (each CRC-checked; a partial last batch, as
    a fetch cut at max_bytes may return, is left out as clients do)."""
    data = read_bytes(log, offset, max_bytes, **kwargs)
    out = []
    pos = 0
    while len(data) - pos >= BATCH_HEADER_BYTES:
        header = read_header(data, pos)
        if pos + header.size > len(data):
            break
        validate_batch(data, pos, header)
        out.append(header)
        pos += header.size
    return out


def consume_all(log: Log, start: int | None = None, max_offset: int | None = None) -> list[bytes]:
    """Read batch by batch from `start` to the end, as a consumer would; the stored bytes."""
    offset = log.log_start_offset if start is None else start
    out: list[bytes] = []
    while True:
        data = log.read(offset, 1 << 30, max_offset=max_offset).read()
        if not data:
            return out
        batches = split_batches(data)
        assert batches, f"read at {offset} returned no whole batch"
        for batch in batches:
            header = read_header(batch)
            validate_batch(batch, 0, header)
            out.append(batch)
            offset = header.next_offset


def record_offsets_and_timestamps(log: Log) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record, by decoding all stored batches."""
    out = []
    for batch in decode_batches(b"".join(stored_batches(log))):
        out.extend((r.offset, r.timestamp_ms) for r in batch.records)
    return out
