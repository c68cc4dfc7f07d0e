"""Benchmarks for the foundation: log append vs raw writes, offset lookup vs log size, codec.

Run: `make bench` (or `.venv/bin/python -m tests.benchmarks.run [--quick] [--dir DIR]`).
Every ratio is measured against a raw ceiling taken in the same run on the same disk, with runs
interleaved and the median of several kept, because page-cache state moves raw numbers a lot.
Not part of `make test`: these are figures, not pass/fail checks (the floors are printed).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.log import Log
from protocol.codec import RequestHeader, decode_request, encode_request
from protocol.framing import LENGTH_PREFIX_BYTES
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.records import Record, build_batch

RECORD_BYTES = 100


def batch_of(target_bytes: int) -> bytes:
    """A producer batch of 100-byte records, as close to `target_bytes` as possible."""
    value = os.urandom(RECORD_BYTES)
    one = len(build_batch([Record(value)], now_ms=0))
    count = max(1, target_bytes // (one - 61 + 1))
    batch = build_batch([Record(value)] * count, now_ms=0)
    while len(batch) > target_bytes and count > 1:
        count -= max(1, count // 100)
        batch = build_batch([Record(value)] * count, now_ms=0)
    return batch


def median_of(runs: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(runs))


# -- 1. append throughput --------------------------------------------------------------------


def raw_append(directory: Path, batch: bytes, count: int, fsync: bool) -> float:
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
        if fsync:
            os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return len(batch) * count / elapsed


def log_append(directory: Path, batch: bytes, count: int, fsync: bool) -> float:
    log_dir = directory / "bench-0"
    config = LogConfig(flush_messages=1) if fsync else LogConfig()
    log = Log.open(log_dir, config, now_ms=0)
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    elapsed = time.perf_counter() - start
    log.delete()
    return len(batch) * count / elapsed


def bench_append(directory: Path, quick: bool) -> list[tuple[str, float, float]]:
    rows = []
    total = (64 if quick else 256) * 1024 * 1024
    for label, size, fsync, volume in (
        ("16 KiB batches", 16 * 1024, False, total),
        ("1 MiB batches", 1024 * 1024, False, total),
        ("16 KiB batches + fsync each", 16 * 1024, True, total // 32),
        ("1 MiB batches + fsync each", 1024 * 1024, True, total // 4),
    ):
        batch = batch_of(size)
        count = max(8, volume // len(batch))
        raws, logs = [], []
        for _ in range(3):  # interleave so both see the same page-cache weather
            raws.append(raw_append(directory, batch, count, fsync))
            logs.append(log_append(directory, batch, count, fsync))
        rows.append((label, statistics.median(raws), statistics.median(logs)))
    return rows


# -- 2. offset lookup vs partition size -----------------------------------------------------


def build_log(directory: Path, total_bytes: int, batch: bytes) -> Log:
    log = Log.open(directory, LogConfig(), now_ms=0)
    for _ in range(max(1, total_bytes // len(batch))):
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    return log


def lookup_us(log: Log, samples: int, rng: random.Random) -> float:
    offsets = [rng.randrange(log.log_start_offset, log.log_end_offset) for _ in range(samples)]
    start = time.perf_counter()
    for offset in offsets:
        log.read(offset, 16384)
    return (time.perf_counter() - start) / samples * 1e6


def bench_lookup(directory: Path, quick: bool) -> tuple[float, float, int, int]:
    batch = batch_of(16 * 1024)
    small = build_log(directory / "small-0", 1024 * 1024, batch)
    big = build_log(directory / "big-0", (256 if quick else 1024) * 1024 * 1024, batch)
    rng = random.Random(42)
    small_us = median_of(5, lambda: lookup_us(small, 20000, rng))
    big_us = median_of(5, lambda: lookup_us(big, 20000, rng))
    sizes = small.size_bytes, big.size_bytes
    small.delete()
    big.delete()
    return small_us, big_us, *sizes


# -- 3. codec --------------------------------------------------------------------------------


def bench_codec() -> tuple[float, float, float]:
    batch = batch_of(1024 * 1024)
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=(ProduceTopicData("t", (ProducePartitionData(0, batch),)),),
    )
    header = RequestHeader(0, 0, 1, "bench")
    frame = encode_request(header, request)
    body = frame[LENGTH_PREFIX_BYTES:]
    n = 300

    def encode_rate() -> float:
        start = time.perf_counter()
        for _ in range(n):
            encode_request(header, request)
        return n / (time.perf_counter() - start)

    def decode_rate() -> float:
        start = time.perf_counter()
        for _ in range(n):
            decode_request(body)
        return n / (time.perf_counter() - start)

    def copy_rate() -> float:  # the raw ceiling: one copy of the same bytes
        start = time.perf_counter()
        for _ in range(n):
            bytes(bytearray(frame))
        return n / (time.perf_counter() - start)

    return median_of(3, encode_rate), median_of(3, decode_rate), median_of(3, copy_rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller volumes (a 256 MiB log)")
    parser.add_argument("--dir", type=Path, default=None, help="scratch dir (default: a temp dir)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="highwater-bench-", dir=args.dir))
    mib = 1024 * 1024
    try:
        print("== log append (100-byte records), median of 3, MB/s")
        print(f"{'case':32} {'raw write':>10} {'log append':>11} {'ratio':>6}  floor")
        for label, raw, log in bench_append(directory, args.quick):
            print(f"{label:32} {raw / mib:10.0f} {log / mib:11.0f} {log / raw:6.2f}  0.50")
        small_us, big_us, small_b, big_b = bench_lookup(directory, args.quick)
        print("\n== offset lookup (Log.read at a random offset), median of 5 x 20000")
        print(f"{small_b / mib:8.1f} MiB partition: {small_us:7.2f} us")
        print(f"{big_b / mib:8.1f} MiB partition: {big_us:7.2f} us")
        print(f"growth: {big_us / small_us:.2f}x  (ceiling 2.00x)")
        enc, dec, copy = bench_codec()
        print("\n== codec: Produce request carrying one 1 MiB batch, median of 3")
        print(f"encode {enc:8.0f} req/s  {enc:8.0f} MiB/s")
        print(f"decode {dec:8.0f} req/s  {dec:8.0f} MiB/s")
        print(f"raw copy of the same frame {copy:8.0f}/s (ceiling)")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
