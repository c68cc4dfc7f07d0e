"""What the metrics cost the produce path: throughput with the metrics listener on vs off.

Run: `make bench-metrics` (or `.venv/bin/python -m tests.benchmarks.metrics_cost`). Starts one
ZooKeeper and two identical 3-broker clusters in a temporary directory: "on" with a metrics
listener on every broker, scraped (/metrics, all three brokers) every `--scrape-interval`
seconds while it runs, and "off" without one. Then `highwater perf produce` (100-byte records,
3 partitions, RF=3, min.insync.replicas=2, acks=all) against each in turn, alternating, and
prints each run, the medians and the cost: 1 - on/off (aim: under 3%). Everything shares this
machine's cores; the idle cluster waits in long polls. Throughput on a shared machine is noisy,
so each run also reports the brokers' CPU time per 100,000 records (user + system, from
/proc/PID/stat, summed over the three brokers): what the metrics add to the brokers' work.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
from pathlib import Path

import trio
from prometheus_client.parser import text_string_to_metric_families

from broker.purgatory import current_request_clock
from broker.request_stats import RequestStats
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceResponse,
    ProduceTopicResponse,
)
from tests.benchmarks.proc_cpu import total_cpu_seconds
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import create_topic, prepare_cluster

_RATE = re.compile(r"^\d+ records sent, ([0-9.]+) records/sec", re.MULTILINE)


def perf(cluster: Cluster, topic: str, records: int) -> float:
    command = [
        sys.executable, "-m", "client.cli", "perf", "produce", "-b", cluster.bootstrap,
        "--topic", topic, "--num-records", str(records), "--record-size", "100",
        "--acks", "all",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = _RATE.search(done.stdout)
    if found is None:
        raise SystemExit(f"no rate in:\n{done.stdout}{done.stderr}")
    return float(found.group(1))


def broker_cpu_s(cluster: Cluster) -> float:
    """User + system CPU seconds used so far by the cluster's broker processes."""
    pids = [b.process.pid for b in cluster.brokers.values() if b.process is not None]
    return total_cpu_seconds(pids)


def requests_answered(ports: list[int]) -> float:
    """Requests the "on" cluster's brokers have answered, from their /metrics."""
    total = 0.0
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            for family in text_string_to_metric_families(r.read().decode()):
                if family.name == "highwater_network_requests":
                    total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


def request_path_cost_us() -> float:
    """What the request path adds per request with the listener on, in this process: three
    clock reads, the purgatory's clock lookup, RequestStats.record with an error walk."""
    stats = RequestStats()
    response = ProduceResponse(
        (ProduceTopicResponse("perf", (ProducePartitionResponse(0, ErrorCode.NONE),)),)
    )
    clock = time.perf_counter

    def one() -> None:
        clock(), clock(), clock(), current_request_clock.get()
        stats.record(0, 0.0001, 0.0005, 0.002, 0.0001, 16_000, 60, response)

    return min(timeit.repeat(one, number=20_000, repeat=7)) / 20_000 * 1e6


def scraper(ports: list[int], interval_s: float, stop: threading.Event) -> None:
    while not stop.wait(interval_s):
        for port in ports:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                r.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrape-interval", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-metrics-bench-") as root:
        zookeeper = ZooKeeperServer(Path(root) / "zookeeper", free_port())
        zookeeper.start()
        ports = [free_port() for _ in range(3)]
        on = Cluster(
            zookeeper.port,
            Path(root) / "on",
            3,
            broker_overrides={
                i + 1: {"metrics.listener": f"http://127.0.0.1:{port}"}
                for i, port in enumerate(ports)
            },
        )
        off = Cluster(zookeeper.port, Path(root) / "off", 3)
        stop = threading.Event()
        try:
            for cluster in (on, off):
                cluster.start()
                prepare_cluster(cluster, timeout_s=60)
                trio.run(
                    create_topic,
                    cluster,
                    "perf",
                    [[1, 2, 3], [2, 3, 1], [3, 1, 2]],
                    {"min.insync.replicas": "2"},
                )
            thread = threading.Thread(
                target=scraper, args=(ports, args.scrape_interval, stop), daemon=True
            )
            thread.start()
            perf(on, "perf", args.records // 4)  # warm-up, both
            perf(off, "perf", args.records // 4)
            rates: dict[str, list[float]] = {"on": [], "off": []}
            cpu: dict[str, list[float]] = {"on": [], "off": []}
            cpu_per_request: list[float] = []
            for round_ in range(args.rounds):
                pairs = [("on", on), ("off", off)]
                for name, cluster in pairs if round_ % 2 == 0 else pairs[::-1]:
                    before = broker_cpu_s(cluster)
                    answered = requests_answered(ports) if name == "on" else 0.0
                    rate = perf(cluster, "perf", args.records)
                    used = broker_cpu_s(cluster) - before
                    per_100k = used * 100_000 / args.records
                    if name == "on":
                        requests = requests_answered(ports) - answered
                        cpu_per_request.append(used / requests * 1e6)
                    rates[name].append(rate)
                    cpu[name].append(per_100k)
                    print(
                        f"round {round_ + 1}: metrics {name:3} {rate:8.0f} records/s, "
                        f"brokers' CPU {per_100k:5.2f} s per 100k records",
                        flush=True,
                    )
            rate_on, rate_off = statistics.median(rates["on"]), statistics.median(rates["off"])
            cpu_on, cpu_off = statistics.median(cpu["on"]), statistics.median(cpu["off"])
            print(f"median throughput: metrics on {rate_on:.0f}, off {rate_off:.0f} records/s")
            print(f"  cost: {(1 - rate_on / rate_off) * 100:+.1f}% (aim: under 3%)")
            print(f"median brokers' CPU per 100k records: on {cpu_on:.2f} s, off {cpu_off:.2f} s")
            print(f"  cost: {(cpu_on / cpu_off - 1) * 100:+.1f}%")
            paired = [a / b for a, b in zip(rates["on"], rates["off"], strict=True)]
            print(
                f"median of the rounds' on/off throughput ratios: {statistics.median(paired):.3f}"
            )
            added = request_path_cost_us()
            per_request = statistics.median(cpu_per_request)
            print(
                f"request path: +{added:.2f} us per request with metrics on, of "
                f"{per_request:.0f} us brokers' CPU per request: {added / per_request * 100:.1f}%"
            )
        finally:
            stop.set()
            for cluster in (on, off):
                cluster.stop()
            zookeeper.stop()


if __name__ == "__main__":
    main()
