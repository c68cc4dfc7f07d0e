"""The leader's record check (protocol/record_check.py) on the append path, in one process:
Log.append_as_leader with and without check_records, interleaved, median of 5, per codec
and batch size (the producer's default 16 KiB and 1 MiB, 100-byte records as `highwater perf`
sends). Run: `.venv/bin/python -m tests.benchmarks.record_check`. A figure, not a test;
`highwater perf produce` against a cluster gives the end-to-end one (docs/reliability.md).
"""

from __future__ import annotations

import functools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import broker.log.log as log_module
from broker.config.log_config import LogConfig
from broker.log.log import Log
from client.cli.perf_tools import payload, records_per_batch
from protocol.compression import Compression
from protocol.record_check import check_records
from protocol.records import Record, build_batch, check_batches

RECORD_BYTES = 100
VOLUME_RECORDS = 200_000


@contextmanager
def unchecked() -> Iterator[None]:
    """The append path as before the check: check_records (and the many-batch path's
    check_producer_records) do nothing."""
    saved = log_module.check_records, log_module.check_producer_records
    log_module.check_records = _nothing
    log_module.check_producer_records = _nothing
    try:
        yield
    finally:
        log_module.check_records, log_module.check_producer_records = saved


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


def append_rate(directory: Path, batch: bytes, count: int, records: int) -> float:
    """Records/s appended by Log.append_as_leader (no fsync: the CPU path)."""
    log = Log.open(directory / "bench-0", LogConfig(), now_ms=0)
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    elapsed = time.perf_counter() - start
    log.delete()
    return records * count / elapsed


def check_rate(batch: bytes, count: int, records: int) -> float:
    """Records/s through check_records alone."""
    ((pos, header),) = check_batches(batch)
    start = time.perf_counter()
    for _ in range(count):
        check_records(batch, pos, header, max_record_bytes=1024 * 1024)
    return records * count / (time.perf_counter() - start)


def median_of(runs: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(runs))


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="highwater-bench-check-"))
    value = payload(RECORD_BYTES)
    try:
        print("== Log.append_as_leader, 100-byte records, median of 5 interleaved, records/s")
        print(f"{'codec':7} {'batch':>7} {'without':>10} {'with':>10} {'ratio':>6} {'check':>10}")
        for codec in (Compression.NONE, Compression.ZSTD, Compression.LZ4, Compression.GZIP):
            for batch_bytes in (16 * 1024, 1024 * 1024):
                n = records_per_batch(RECORD_BYTES, batch_bytes)
                batch = build_batch([Record(value, None, 0)] * n, now_ms=0, compression=codec)
                count = max(20, VOLUME_RECORDS // n)
                without, with_check = [], []
                for _ in range(5):
                    with unchecked():
                        without.append(append_rate(directory, batch, count, n))
                    with_check.append(append_rate(directory, batch, count, n))
                alone = median_of(3, functools.partial(check_rate, batch, count, n))
                off, on = statistics.median(without), statistics.median(with_check)
                label = f"{batch_bytes // 1024} KiB"
                print(
                    f"{codec.name.lower():7} {label:>7} {off:10.0f} {on:10.0f} {on / off:6.2f} "
                    f"{alone:10.0f}"
                )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
