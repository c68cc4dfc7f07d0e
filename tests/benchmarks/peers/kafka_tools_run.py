"""`python -m tests.benchmarks.peers --kafka-tools`: Kafka's own perf tools (kafka_tools.py)
against Highwater's Kafka listener, then against Apache Kafka 3.9.2, one cluster at a time, each
set up as the peer benchmark sets it (3 nodes, a topic per measure with 1 partition, RF=3,
min.insync.replicas=2, led by broker 1). Each run: kafka-producer-perf-test (acks=all, as fast
as it goes), kafka-consumer-perf-test of what it wrote, EndToEndLatency (one record at a time:
the tool has no rate setting). Then one table with the Highwater / Kafka ratio on each row."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from client.cli.zookeeper_server import find_java
from tests.benchmarks.kafka.jars import classpath
from tests.benchmarks.peers import kafka_tools
from tests.benchmarks.peers.common import Workload

E2E_RECORDS = 2_000  # EndToEndLatency's lockstep: about 1-3 ms a record here
CONSUMER_TIMEOUT_MS = 20_000


def _tool(main_class: str, args: list[str], timeout_s: float) -> str:
    command = kafka_tools.java_command(find_java(), classpath(), main_class, args)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{main_class} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def one_run(bootstrap: str, run: int, workload: Workload) -> dict[str, float]:
    """The three tools on the run's topics (created by the peer's prepare)."""
    produce, e2e = f"produce-{run}", f"e2e-{run}"
    size, records, timeout_s = workload.record_size, workload.records, workload.timeout_s
    producer = _tool(
        kafka_tools.PRODUCER,
        kafka_tools.producer_args(bootstrap, produce, records, size),
        timeout_s,
    )
    consumer = _tool(
        kafka_tools.CONSUMER,
        kafka_tools.consumer_args(bootstrap, produce, records, CONSUMER_TIMEOUT_MS),
        timeout_s,
    )
    end_to_end = _tool(
        kafka_tools.END_TO_END,
        kafka_tools.end_to_end_args(bootstrap, e2e, E2E_RECORDS, size),
        timeout_s,
    )
    return kafka_tools.figures(producer, consumer, end_to_end, records)


def measure(runs: int, workload: Workload) -> str:
    from tests.benchmarks.peers import highwater_peer, kafka_peer

    systems: list[tuple[str, Callable[[], AbstractContextManager[Any]], Callable[[Any], str]]] = [
        ("Highwater (Kafka listener)", highwater_peer.running_kafka_wire, _kafka_bootstrap),
        ("Kafka", kafka_peer.running, lambda peer: peer.cluster.bootstrap),
    ]
    results: dict[str, list[dict[str, float]]] = {}
    for name, running, bootstrap in systems:
        with running() as peer:
            results[name] = []
            for run in range(1, runs + 1):
                peer.prepare(run)
                figures = one_run(bootstrap(peer), run, workload)
                results[name].append(figures)
                print(
                    f"{name} run {run}: producer {figures['produce.rate']:,.0f} rec/s, consumer "
                    f"{figures['consume.rate']:,.0f} rec/s, EndToEndLatency avg "
                    f"{figures['e2e.avg']:.2f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    return kafka_tools.render(results["Highwater (Kafka listener)"], results["Kafka"])


def _kafka_bootstrap(peer: Any) -> str:
    return str(peer.kafka_bootstrap)
