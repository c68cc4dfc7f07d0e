"""Latency and broker CPU at a steady rate (docs/performance.md), with and without fetch sessions.

Run: `make bench-latency` (or `.venv/bin/python -m tests.benchmarks.latency`).
For each variant (`--sessions` on and/or off, times each of `--linger-ms`), alternating,
`--runs` times: ZooKeeper and 3 brokers (Kafka's default settings, but
`max.incremental.fetch.session.cache.slots` 1000 = KIP-227 sessions on, or 0 = off), a topic
`e2e` (1 partition, RF=3, min.insync.replicas=2, led by broker 1) beside `--idle-partitions`
idle RF=3 partitions (what __consumer_offsets' 50 are on a cluster whose consumers use
groups), then `highwater perf end-to-end` at `--rate` records/s, acks=all, with the variant's
linger.ms: its p50/p99/p99.9, and the three brokers' CPU over the run, from /proc (user +
system). With `--split`, the brokers get metrics listeners and each run also prints how the
leader's Produce and Fetch requests spent their time on average (Kafka's RequestMetrics split).
Figures, not pass/fail checks; the machine's other load moves them, so compare variants of
one run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from broker.metrics import REQUEST_TIME_METRICS
from client.cli.zookeeper_server import free_port
from tests.benchmarks.proc_cpu import total_cpu_seconds
from tests.integration.cluster_harness import Cluster
from tests.integration.metrics_checks import Scrape, scrape, value
from tests.integration.replication_checks import create_topic, prepare_cluster

_PERCENTILES = re.compile(r"([\d.]+) ms 50th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th")
# How the split names the parts: "request" time is decoding here (there is no request queue).
_LABELS = {"request": "decode"}


def time_split(before: Scrape, after: Scrape, api: str) -> str:
    """The mean of each part of `api`'s requests between two scrapes, in microseconds."""

    def delta(name: str) -> float:
        return value(after, name, request=api) - value(before, name, request=api)

    count = delta(REQUEST_TIME_METRICS["total"] + "_count")
    if not count:
        return f"{api}: none"
    means = {k: delta(n + "_sum") / count * 1e6 for k, n in REQUEST_TIME_METRICS.items()}
    parts = ", ".join(f"{_LABELS.get(k, k)} {means[k]:.0f}" for k in means if k != "total")
    return f"{api} x{count:.0f}: {means['total']:.0f} µs ({parts})"


def one_run(
    zk_port: int, root: Path, slots: int, linger_ms: float, args: argparse.Namespace
) -> tuple[dict[str, float], str]:
    """The run's figures, and with --split the leader's time split ("" without)."""
    overrides = {
        "max.incremental.fetch.session.cache.slots": str(slots),
        "auto.leader.rebalance.enable": "false",
    }
    listeners = (
        {i: {"metrics.listener": f"http://127.0.0.1:{free_port()}"} for i in (1, 2, 3)}
        if args.split
        else None
    )
    cluster = Cluster(zk_port, root, 3, overrides, listeners)
    try:
        cluster.start()
        prepare_cluster(cluster, timeout_s=60)
        trio.run(create_topic, cluster, "e2e", [[1, 2, 3]], {"min.insync.replicas": "2"})
        spread = [[1 + (i + k) % 3 for k in range(3)] for i in range(args.idle_partitions)]
        if spread:
            trio.run(create_topic, cluster, "idle", spread)
        pids = [b.process.pid for b in cluster.brokers.values() if b.process is not None]
        command = [
            sys.executable, "-m", "client.cli", "perf", "end-to-end", "--topic", "e2e",
            "--num-records", str(args.records), "--throughput", str(args.rate),
            "--linger-ms", str(linger_ms), "-b", cluster.bootstrap,
        ]  # fmt: skip
        leader = cluster.brokers[1]
        scraped = scrape(leader) if args.split else None
        before_s, started = total_cpu_seconds(pids), time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        used_s, wall_s = total_cpu_seconds(pids) - before_s, time.monotonic() - started
        split = ""
        if scraped is not None and (now := scrape(leader)) is not None:
            split = "; ".join(time_split(scraped, now, api) for api in ("Produce", "Fetch"))
        match = _PERCENTILES.search(done.stdout + done.stderr)
        if match is None:
            raise SystemExit(f"no percentiles in:\n{done.stdout}{done.stderr}")
        p50, p99, p999 = (float(x) for x in match.groups())
        return {"p50": p50, "p99": p99, "p99.9": p999, "cores": used_s / wall_s}, split
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--idle-partitions", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--split", action="store_true", help="print the leader's time split")
    parser.add_argument("--sessions", choices=("both", "on", "off"), default="both")
    parser.add_argument(
        "--linger-ms", type=float, nargs="+", default=[0.0], help="the producer's, one or more"
    )
    args = parser.parse_args()
    from client.cli.zookeeper_server import ZooKeeperServer

    directory = Path(tempfile.mkdtemp(prefix="highwater-bench-latency-"))
    zookeeper = ZooKeeperServer(directory / "zookeeper", free_port())
    zookeeper.start()
    slots_by_sessions = {"on": 1000, "off": 0}
    chosen = ("on", "off") if args.sessions == "both" else (args.sessions,)
    variants = {
        f"sessions {on_off} ({slots_by_sessions[on_off]} slots), linger.ms {linger_ms:g}": (
            slots_by_sessions[on_off],
            linger_ms,
        )
        for linger_ms in args.linger_ms
        for on_off in chosen
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    print(
        f"3 brokers, RF=3, min.insync.replicas=2, acks=all, {args.rate} records/s, "
        f"{args.records} records, {args.idle_partitions} idle partitions beside"
    )
    try:
        for run in range(args.runs):
            for name, (slots, linger_ms) in variants.items():
                root = directory / f"{run}-{slots}-{linger_ms:g}"
                figures, split = one_run(zookeeper.port, root, slots, linger_ms, args)
                results[name].append(figures)
                print(
                    f"  run {run + 1} {name}: p50 {figures['p50']:.1f} ms, p99 "
                    f"{figures['p99']:.1f} ms, p99.9 {figures['p99.9']:.1f} ms, broker CPU "
                    f"{figures['cores']:.2f} cores",
                    flush=True,
                )
                if split:
                    print(f"    the leader's requests, mean: {split}", flush=True)
    finally:
        zookeeper.stop()
    print("medians:")
    for name, runs in results.items():
        medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"  {name}: p50 {medians['p50']:.1f} ms, p99 {medians['p99']:.1f} ms, "
            f"p99.9 {medians['p99.9']:.1f} ms, broker CPU {medians['cores']:.2f} cores"
        )


if __name__ == "__main__":
    main()
