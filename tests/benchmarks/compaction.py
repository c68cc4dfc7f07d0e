"""Compaction benchmarks (docs/operations.md, "Compacted topics"), run by `make bench`:

1. the cleaner's throughput: `clean()` over a changelog-like log (keyed 100-byte records,
   batches as a producer sends them), in MB of log cleaned per second, against this machine's
   raw read+write of the same bytes (a file copy in 1 MiB chunks, synced), interleaved,
   median of 3;
2. produce throughput to a compacted topic on a real 3-broker cluster while the cleaner runs,
   against the same with the cleaner off (brokers restarted between modes), median of 3 each.

Figures, not pass/fail checks; the aims are printed beside them.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio

from broker.config.log_config import LogConfig
from broker.log.cleaner import clean
from broker.log.log import Log
from protocol.records import Record, build_batch

MIB = 1024 * 1024
VALUE_BYTES = 100
RECORDS_PER_BATCH = 100


# -- 1. the cleaner against raw read+write ---------------------------------------------------


def build_changelog(directory: Path, total_bytes: int, keys: int, rng: random.Random) -> Log:
    config = LogConfig(segment_bytes=64 * MIB, cleanup_policy=("compact",))
    log = Log.open(directory, config, now_ms=0)
    value = os.urandom(VALUE_BYTES)
    while log.size_bytes < total_bytes:
        records = [
            Record(value, key=b"key-%08d" % rng.randrange(keys), timestamp_ms=0)
            for _ in range(RECORDS_PER_BATCH)
        ]
        log.append_as_leader(build_batch(records, now_ms=0), 0, 0)
    log.roll(0)
    return log


def clean_rate(log: Log) -> tuple[float, float, int, int]:
    """(MB/s of log read, seconds, bytes read, bytes written) for one whole cleaning."""
    task = log.cleaning_task(0, log.active_segment.base_offset, 0, 4 * MIB)
    start = time.perf_counter()
    result = clean(task)
    elapsed = time.perf_counter() - start
    for path in log.directory.glob("*.cleaned"):
        path.unlink()
    return result.bytes_read / elapsed, elapsed, result.bytes_read, result.bytes_written


def raw_copy_rate(log: Log, scratch: Path) -> float:
    """Read every segment and write the same bytes to a new file, as the cleaner reads its
    input and (at most) writes it back."""
    total = 0
    start = time.perf_counter()
    with (scratch / "copy.bin").open("wb") as out:
        for segment in log.segments[:-1]:
            with segment.log_path.open("rb") as source:
                while chunk := source.read(MIB):
                    out.write(chunk)
                    total += len(chunk)
        out.flush()
        os.fsync(out.fileno())  # the cleaner syncs its .cleaned segments before the swap
    elapsed = time.perf_counter() - start
    (scratch / "copy.bin").unlink()
    return total / elapsed


def bench_cleaner(directory: Path, quick: bool) -> None:
    total = (32 if quick else 128) * MIB
    print(f"== the log cleaner over a {total // MIB} MiB changelog, median of 3, MB/s")
    print(f"{'keys':>8} {'raw r+w':>9} {'cleaner':>9} {'ratio':>6} {'kept':>6}  aim")
    for keys in (1_000, 100_000):
        log = build_changelog(directory / f"changelog-{keys}-0", total, keys, random.Random(18))
        raws, cleans, kept = [], [], 0.0
        for _ in range(3):
            raws.append(raw_copy_rate(log, directory))
            rate, _, read, written = clean_rate(log)
            cleans.append(rate)
            kept = written / read
        raw, cleaner = statistics.median(raws), statistics.median(cleans)
        print(
            f"{keys:8} {raw / MIB:9.0f} {cleaner / MIB:9.1f} {cleaner / raw:6.3f} "
            f"{kept:6.1%}  >= 0.3"
        )
        log.delete()


# -- 2. produce while the cleaner runs ------------------------------------------------------


async def produce_keyed(bootstrap: str, topic: str, count: int, keys: int) -> float:
    """Records/s of `count` keyed 100-byte records, acks=all, one idempotent producer."""
    from client.producer import Producer

    value = os.urandom(VALUE_BYTES)
    rng = random.Random(7)
    names = [b"key-%08d" % i for i in range(keys)]
    async with Producer(bootstrap, linger_ms=5) as producer:
        start = time.perf_counter()
        for i in range(count):
            key = names[rng.randrange(keys)]
            try:
                producer.send_nowait(topic, value, key=key)
            except trio.WouldBlock:
                await producer.send(topic, value, key=key)
            if i % RECORDS_PER_BATCH == 0:
                await trio.lowlevel.checkpoint()
        await producer.flush()
        return count / (time.perf_counter() - start)


def bench_produce(directory: Path, quick: bool) -> None:
    from client.cli.zookeeper_server import ZooKeeperServer, free_port
    from tests.integration.cluster_harness import Cluster
    from tests.integration.replication_checks import (
        FAST_REPLICATION,
        create_topic,
        logged_events,
        prepare_cluster,
    )

    count = 100_000 if quick else 300_000
    topic = "changelog"
    zookeeper = ZooKeeperServer(directory / "zookeeper", free_port())
    zookeeper.start()
    overrides = {**FAST_REPLICATION, "log.cleaner.backoff.ms": "200"}
    cluster = Cluster(zookeeper.port, directory / "cluster", 3, overrides)
    rates: dict[bool, list[float]] = {True: [], False: []}
    cleaned: dict[bool, int] = {True: 0, False: 0}
    try:
        cluster.start()
        prepare_cluster(cluster, timeout_s=60)
        config = {
            "cleanup.policy": "compact",
            "segment.bytes": str(2 * MIB),
        }
        trio.run(create_topic, cluster, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]], config)
        for cleaner_on in (False, True) * 3:
            for broker in cluster.brokers.values():
                broker.overrides["log.cleaner.enable"] = str(cleaner_on).lower()
                broker.restart()
            prepare_cluster(cluster, timeout_s=60)
            marks = cluster.log_marks()
            rate = trio.run(produce_keyed, cluster.bootstrap, topic, count, 50_000)
            rates[cleaner_on].append(rate)
            cleaned[cleaner_on] += sum(
                len(logged_events(b, "log cleaned", since=marks[b.broker_id]))
                for b in cluster.brokers.values()
            )
    finally:
        cluster.stop()
        zookeeper.stop()
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"\n== produce {count} keyed records to a compacted topic (3 partitions, RF 3, acks=all)")
    print(f"cleaner off: {off:9.0f} records/s  (runs {[round(r) for r in rates[False]]})")
    print(
        f"cleaner on:  {on:9.0f} records/s  (runs {[round(r) for r in rates[True]]}; "
        f"{cleaned[True]} cleanings during them)"
    )
    print(f"ratio {on / off:.2f}  aim >= 0.8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller volumes")
    parser.add_argument("--dir", type=Path, default=None, help="scratch dir (default: a temp dir)")
    parser.add_argument("--skip-cluster", action="store_true", help="only the cleaner figure")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="highwater-bench-", dir=args.dir))
    try:
        bench_cleaner(directory, args.quick)
        if not args.skip_cluster:
            bench_produce(directory, args.quick)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
