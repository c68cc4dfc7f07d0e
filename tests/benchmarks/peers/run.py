"""`python -m tests.benchmarks.peers`: each system in turn (never two clusters at once), its
measures `--runs` times, then one table and the goal table against Apache Kafka; progress on
stderr, the tables (or --json) on stdout. After Highwater's cluster stops, and before the next
system starts, the yardsticks of its goal rows: round_floor's no-work trio and epoll floors at
the rate Highwater's leader served Produce requests in each run's end-to-end phase, and
`perf produce`'s build-only ceiling in this process. Kafka needs its jars first: `make
kafka-jars` (what `make bench-peers` runs)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from client.cli.perf_tools import build_only_rate
from tests.benchmarks import round_floor
from tests.benchmarks.peers import goals, table
from tests.benchmarks.peers.common import CountsRounds, Peer, WithBrokers, Workload
from tests.benchmarks.proc_cpu import total_cpu_seconds

# Highwater with its own clients, then with confluent-kafka's through its Kafka listener, then
# Apache Kafka with the same confluent-kafka clients, then the other peers.
SYSTEMS = ("highwater", "highwater-kafka", "kafka", "nats", "redis")
# `highwater perf produce`'s batch.size (run_produce_perf's default, which produce() uses).
PERF_BATCH_SIZE_BYTES = 16_384


def _systems() -> dict[str, Callable[[], AbstractContextManager[Peer]]]:
    # Imported here: each module needs its own client library (the `bench` extra).
    from tests.benchmarks.peers import highwater_peer, kafka_peer, nats_peer, redis_peer

    return {
        "highwater": highwater_peer.running,
        "highwater-kafka": highwater_peer.running_kafka_wire,
        "kafka": kafka_peer.running,
        "nats": nats_peer.running,
        "redis": redis_peer.running,
    }


def one_run(
    peer: Peer, run: int, workload: Workload, profile: str | None = None
) -> dict[str, float]:
    peer.prepare(run)
    figures = {"produce": peer.produce(run, workload), "consume": peer.consume(run, workload)}
    pids = peer.server_pids()
    brokers = peer.broker_pids() if isinstance(peer, WithBrokers) else []
    leader = [peer.leader_pid()] if isinstance(peer, CountsRounds) else []
    produces = peer.leader_produce_requests() if isinstance(peer, CountsRounds) else 0.0
    before_s, brokers_before_s = total_cpu_seconds(pids), total_cpu_seconds(brokers)
    leader_before_s = total_cpu_seconds(leader)
    spy = _py_spy(leader[0], f"{profile}-run{run}.txt", workload) if profile and leader else None
    started = time.monotonic()
    latencies = peer.end_to_end(run, workload)
    elapsed_s = time.monotonic() - started
    if spy is not None:
        spy.wait(timeout=60)
    figures["cpu"] = (total_cpu_seconds(pids) - before_s) / elapsed_s
    figures[goals.E2E_RATE] = workload.e2e_records / elapsed_s
    if brokers:
        figures[goals.BROKER_CPU] = (total_cpu_seconds(brokers) - brokers_before_s) / elapsed_s
    if isinstance(peer, CountsRounds):
        after = peer.leader_produce_requests()
        figures[goals.ROUNDS_PER_S] = goals.rounds_per_s(produces, after, elapsed_s)
        figures[goals.LEADER_CPU] = (total_cpu_seconds(leader) - leader_before_s) / elapsed_s
    if len(latencies) < workload.e2e_records:
        raise SystemExit(f"{peer.name}: {len(latencies)} of {workload.e2e_records} records seen")
    return figures | table.latency_figures(latencies)


def _py_spy(pid: int, path: str, workload: Workload) -> subprocess.Popen[bytes]:
    """py-spy sampling the leader (without pausing it) for the end-to-end phase's length,
    collapsed stacks into `path`; for finding where its time goes, not for a measured run."""
    command = [
        str(Path(sys.executable).with_name("py-spy")),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, int(workload.duration_s))),
        "--nonblocking",
        "--format",
        "raw",
        "--output",
        path,
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


def yardsticks(figures: dict[str, float], workload: Workload, floor_s: float) -> None:
    """Into one Highwater run's figures: the no-work floor (trio, then plain epoll) at the
    Produce rate its leader served end to end, and the build-only ceiling of its records. Run
    with no cluster up: the floor's three processes are a system of their own."""
    rate = figures[goals.ROUNDS_PER_S]
    for key, server in ((goals.FLOOR_TRIO, "trio"), (goals.FLOOR_PLAIN, "plain")):
        achieved, per_round_us, cores, _p50_ms = round_floor.run_once(server, rate, floor_s)
        figures[key] = cores
        if server == "trio":
            figures[goals.FLOOR_TRIO_LEADER_US] = per_round_us[0]
        print(
            f"  no-work floor ({server}) at {rate:.0f} rounds/s asked: {achieved:.0f} rounds/s, "
            f"{cores:.2f} cores",
            file=sys.stderr,
            flush=True,
        )
    figures[goals.BUILD_ONLY] = build_only_rate(
        workload.records, workload.record_size, PERF_BATCH_SIZE_BYTES
    )
    print(
        f"  build-only ceiling: {figures[goals.BUILD_ONLY]:,.0f} rec/s",
        file=sys.stderr,
        flush=True,
    )


def measure(
    systems: list[str], runs: int, workload: Workload, floor_s: float, profile: str | None = None
) -> Iterator[tuple[str, list[dict[str, float]]]]:
    starters = _systems()
    for key in systems:
        load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
        print(f"{key}: before: {load.strip()}", file=sys.stderr, flush=True)
        with starters[key]() as peer:
            results = []
            for run in range(1, runs + 1):
                spied = profile if key == "highwater" else None
                figures = one_run(peer, run, workload, spied)
                results.append(figures)
                print(
                    f"{peer.name} run {run}: produce {figures['produce']:,.0f} rec/s, consume "
                    f"{figures['consume']:,.0f} rec/s, e2e p50 {figures['p50']:.1f} ms, p99 "
                    f"{figures['p99']:.1f} ms, p99.9 {figures['p99.9']:.1f} ms, server CPU "
                    f"{figures['cpu']:.2f} cores{_extra(figures)}",
                    file=sys.stderr,
                    flush=True,
                )
        if key == "highwater":
            for figures in results:
                yardsticks(figures, workload, floor_s)
        load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
        print(f"{key}: after: {load.strip()}", file=sys.stderr, flush=True)
        yield peer.name, results


def _extra(figures: dict[str, float]) -> str:
    text = f" (brokers {figures[goals.BROKER_CPU]:.2f})" if goals.BROKER_CPU in figures else ""
    text += f", end-to-end {figures[goals.E2E_RATE]:,.0f} rec/s over its wall time"
    if goals.ROUNDS_PER_S in figures:
        text += f", leader's Produce {figures[goals.ROUNDS_PER_S]:.0f}/s"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="A short validation: 1 run, small.")
    parser.add_argument("--json", action="store_true", help="Every run's figures, as JSON.")
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help="Comma-separated, in this order."
    )
    parser.add_argument(
        "--kafka-tools",
        action="store_true",
        help="Instead: Kafka's own perf tools against Highwater's Kafka listener and Kafka.",
    )
    parser.add_argument(
        "--profile-leader",
        metavar="PREFIX",
        help="py-spy (the venv's) samples Highwater's leader in each end-to-end phase into "
        "PREFIX-runN.txt (collapsed stacks); the figures of such a run are not clean.",
    )
    args = parser.parse_args()
    if args.kafka_tools:
        _kafka_tools(args.runs, args.quick)
        return
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    workload = Workload(records=20_000, duration_s=3) if args.quick else Workload()
    runs = 1 if args.quick else args.runs
    floor_s = 3.0 if args.quick else 10.0
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(
        f"3 nodes each on loopback, {workload.record_size}-byte records; produce and consume "
        f"{workload.records:,}, end-to-end {workload.rate:,}/s for {workload.duration_s:g} s; "
        f"{runs} run(s) each; before: {load}",
        file=sys.stderr,
        flush=True,
    )
    results = dict(measure(systems, runs, workload, floor_s, args.profile_leader))
    after = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    if args.json:
        document: dict[str, Any] = {
            "workload": vars(workload) | {"e2e_records": workload.e2e_records},
            "load_before": load,
            "load_after": after,
            "runs": results,
        }
        if "Highwater" in results:
            document["goal"] = table.goal(results)
            document["goal_against_kafka"] = goals.document(results)
        print(json.dumps(document, indent=2))
        return
    print(table.render(results))
    if "Highwater" in results and len(results) > 1:
        verdict = table.goal(results)
        met = "met" if all(verdict.values()) else "NOT met"
        detail = ", ".join(f"{k} {'ok' if v else 'behind'}" for k, v in verdict.items())
        print(
            f"goal (Highwater ahead on throughput, p99 no worse than the best peer): "
            f"{met} ({detail})"
        )
    if "Highwater" in results:
        print()
        print("goals against Apache Kafka:")
        print(goals.render(results))
    print(f"machine load before: {load}")
    print(f"machine load after: {after}")


def _kafka_tools(runs: int, quick: bool) -> None:
    from tests.benchmarks.peers import kafka_tools_run

    workload = Workload(records=20_000) if quick else Workload()
    runs = 1 if quick else runs
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(
        f"Kafka 3.9.2's tools, 3 nodes on loopback, RF=3, min.insync.replicas=2, acks=all, "
        f"{workload.record_size}-byte records: produce and consume {workload.records:,}, "
        f"EndToEndLatency {kafka_tools_run.E2E_RECORDS:,} one at a time; {runs} run(s) each; "
        f"before: {load}",
        file=sys.stderr,
        flush=True,
    )
    print(kafka_tools_run.measure(runs, workload))
    after = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"machine load after: {after}")


if __name__ == "__main__":
    main()
