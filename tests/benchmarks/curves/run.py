"""Run: `.venv/bin/python -m tests.benchmarks.curves` (`make bench-curves`).

Highwater first, then Kafka (never two clusters at once). Per partition count, grown in one
cluster: the brokers' idle CPU and RSS over --window-s, then a controlled shutdown of a broker
leading a third, then a SIGKILL of the controller; each measure --runs times.
Then throughput: 1/10/100 partitions against 1/4/16 `highwater perf produce` processes.
Then a broker's restart after SIGKILL against 1/5/20 GiB on its disk (restart.py), then
Kafka's against 1/5 GiB (kafka_restart.py).
Tables on stdout (markdown), a PNG per curve in --out."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.benchmarks.curves import (
    fill,
    highwater_side,
    kafka_restart,
    kafka_side,
    plot,
    restart,
)
from tests.benchmarks.curves.measure import Point, growth_exponent, idle_cpu_percent, rss_mib, table
from tests.benchmarks.proc_cpu import load_average

Series = dict[str, list[Point]]
SETTLE_S = 5.0


def idle(
    side: highwater_side.HighwaterCurves | kafka_side.KafkaCurves, window_s: float, runs: int
) -> tuple[float, ...]:
    pids = side.broker_pids()
    idle_cpu_percent(pids, SETTLE_S)  # leaders and fetchers settle after the last change
    return tuple(idle_cpu_percent(pids, window_s) for _ in range(runs))


def highwater_partition_curves(
    counts: Sequence[int],
    window_s: float,
    runs: int,
    curves: dict[str, Series],
    profile_failover: str | None = None,
) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="hw-curves-") as root,
        highwater_side.running(Path(root)) as hw,
    ):
        hw.profile_failover = profile_failover
        for count in counts:
            hw.grow(count)
            cpu = idle(hw, window_s, runs)
            rss = (sum(rss_mib(pid) for pid in hw.broker_pids()) / 3,)
            curves["idle_cpu"]["Highwater"].append(Point(count, cpu))
            curves["rss"]["Highwater"].append(Point(count, rss))
            shutdowns = [hw.controlled_shutdown_s() for _ in range(runs)]
            curves["shutdown"]["Highwater"].append(Point(count, tuple(s for s, _, _ in shutdowns)))
            failovers = tuple(hw.failover_s() for _ in range(runs))
            curves["failover"]["Highwater"].append(Point(count, failovers))
            print(
                f"Highwater {count} partitions: idle CPU {cpu} %, RSS/broker {rss[0]:.0f} MiB, "
                f"{shutdown_summary(shutdowns)}, "
                f"failover {[round(f, 2) for f in failovers]} s; "
                f"{load_average()}",
                flush=True,
            )


def kafka_partition_curves(
    counts: Sequence[int], window_s: float, runs: int, curves: dict[str, Series]
) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="kafka-curves-") as root,
        kafka_side.running(Path(root)) as kafka,
    ):
        for count in counts:
            kafka.grow(count)
            cpu = idle(kafka, window_s, runs)
            rss = (sum(rss_mib(pid) for pid in kafka.broker_pids()) / 3,)
            curves["idle_cpu"]["Kafka"].append(Point(count, cpu))
            curves["rss"]["Kafka"].append(Point(count, rss))
            print(f"Kafka {count} partitions: idle CPU {cpu} %, RSS {rss} MiB", flush=True)
            shutdowns = [kafka.controlled_shutdown_s() for _ in range(runs)]
            curves["shutdown"]["Kafka"].append(Point(count, tuple(s for s, _, _ in shutdowns)))
            failovers = tuple(kafka.failover_s() for _ in range(runs))
            curves["failover"]["Kafka"].append(Point(count, failovers))
            print(
                f"Kafka {count} partitions: idle CPU {cpu} %, RSS/broker {rss[0]:.0f} MiB, "
                f"{shutdown_summary(shutdowns)}, "
                f"failover {[round(f, 2) for f in failovers]} s; {load_average()}",
                flush=True,
            )


def shutdown_summary(shutdowns: Sequence[tuple[float, int, float | None]]) -> str:
    return (
        f"shutdown {[round(s, 2) for s, _, _ in shutdowns]} s leading "
        f"{[n for _, n, _ in shutdowns]} (accepted after "
        f"{[None if a is None else round(a, 2) for _, _, a in shutdowns]} s)"
    )


def throughput_curves(
    partition_counts: Sequence[int], producer_counts: Sequence[int], records: int, runs: int
) -> Series:
    """records/s by partition count, a series per producer count; `records` in all per run,
    split between the producers."""
    series: Series = {f"{p} producers": [] for p in producer_counts}
    with (
        tempfile.TemporaryDirectory(prefix="hw-curves-tp-") as root,
        highwater_side.running(Path(root)) as hw,
    ):
        for partitions in partition_counts:
            topic = f"tp-{partitions}"
            hw.grow(partitions, topic)
            for producers in producer_counts:
                rates = tuple(
                    hw.produce_rate(topic, producers, max(1, records // producers))
                    for _ in range(runs)
                )
                series[f"{producers} producers"].append(Point(partitions, rates))
                print(
                    f"Highwater {partitions} partitions, {producers} producers: "
                    f"{[round(r) for r in rates]} records/s; {load_average()}",
                    flush=True,
                )
    return series


def restart_curves(gibs: Sequence[int], runs: int, series: Series) -> None:
    """Seconds from SIGKILL to each step of Highwater's restart (restart.py), a series
    "Highwater: <step>" per step, by the GiB the broker holds; the data grows in one cluster,
    in the order given."""
    with (
        tempfile.TemporaryDirectory(prefix="hw-curves-restart-") as root,
        highwater_side.running(Path(root)) as hw,
    ):
        restart.create_topic(hw)
        victim = max(b for b in hw.cluster.brokers if b != hw.controller_id())
        for gib in gibs:
            held = restart.fill(hw, victim, gib * fill.GIB)
            times = [restart.restart_s(hw, victim) for _ in range(runs)]
            add_restart_point(series, "Highwater", held, times)


def kafka_restart_curves(gibs: Sequence[int], runs: int, series: Series) -> None:
    """The same for Kafka 3.9 (kafka_restart.py), series "Kafka: <step>"."""
    with (
        tempfile.TemporaryDirectory(prefix="kafka-curves-restart-") as root,
        kafka_restart.running(Path(root)) as kafka,
    ):
        kafka.create_topic()
        victim = max(b for b in kafka.cluster.brokers if b != kafka.controller_id())
        for gib in gibs:
            held = kafka.fill(victim, gib * fill.GIB)
            measured = [kafka.restart_s(victim) for _ in range(runs)]
            print(
                f"Kafka restart starts {[s for _, s, _ in measured]}, unflushed segments "
                f"recovered {[n for _, _, n in measured]}",
                flush=True,
            )
            add_restart_point(series, "Kafka", held, [t for t, _, _ in measured])


def add_restart_point(
    series: Series, system: str, held: int, times: Sequence[restart.RestartTimes]
) -> None:
    # x: what the broker holds (the fill stops a poll after the target)
    held_gib = max(1, round(held / fill.GIB))
    by_step = list(zip(restart.STEPS, restart.by_step(times), strict=True))
    for step, values in by_step:
        series.setdefault(f"{system}: {step}", []).append(Point(held_gib, values))
    print(
        f"{system} restart with {held / fill.GIB:.2f} GiB: "
        + ", ".join(f"{step} {[round(v, 2) for v in values]} s" for step, values in by_step)
        + f"; {load_average()}",
        flush=True,
    )


def growth_note(series: Series, floor: dict[str, float] | None = None) -> str:
    parts = []
    for name, points in series.items():
        k = growth_exponent(points, (floor or {}).get(name, 0.0))
        parts.append(f"{name}: {'n/a' if k is None else f'{k:.2f}'}")
    return "Growth exponent k in y ~ x^k, first to last point (1 = linear): " + ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10, 100, 1000, 3000])
    parser.add_argument("--kafka-partitions", type=int, nargs="*", default=None)
    parser.add_argument("--window-s", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--tp-partitions", type=int, nargs="*", default=[1, 10, 100])
    parser.add_argument("--producers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--records", type=int, default=48_000)
    parser.add_argument("--restart-gib", type=int, nargs="*", default=[1, 5, 20])
    parser.add_argument("--kafka-restart-gib", type=int, nargs="*", default=[1, 5])
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument(
        "--merge",
        type=Path,
        help="JSON of points measured before ({curve: {series: [[x, [runs]]]}}), drawn beside",
    )
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["highwater", "kafka", "throughput", "restart", "kafka-restart"],
    )
    parser.add_argument(
        "--profile-failover",
        metavar="PREFIX",
        help="py-spy samples the surviving brokers through each of Highwater's failovers into "
        "PREFIX-<partitions>p-failover<n>-b<id>.txt (collapsed stacks; not a clean run)",
    )
    args = parser.parse_args()
    kafka_counts = args.partitions if args.kafka_partitions is None else args.kafka_partitions
    curves: dict[str, Series] = {
        name: {"Highwater": [], "Kafka": []} for name in ("idle_cpu", "rss", "failover", "shutdown")
    }
    if args.merge is not None:
        merge(curves, json.loads(args.merge.read_text()))
        report(curves, args.out)  # also redraws saved points alone (with --skip of all five)
    print(load_average(), flush=True)
    # Tables and PNGs after each cluster: what is measured survives a later failure.
    if "highwater" not in args.skip:
        highwater_partition_curves(
            args.partitions, args.window_s, args.runs, curves, args.profile_failover
        )
        report(curves, args.out)
    if "kafka" not in args.skip and kafka_counts:
        kafka_partition_curves(kafka_counts, args.window_s, args.runs, curves)
        report(curves, args.out)
    if "throughput" not in args.skip and args.tp_partitions:
        series = throughput_curves(args.tp_partitions, args.producers, args.records, args.runs)
        title = "Produce throughput (acks=all, 100 B) vs partitions and producers"
        print()
        print(table(title, "partitions", series, "records/s"))
        plot.draw(args.out / "curve-throughput.png", title, "partitions", "records/s", series)
    # One system at a time; each cluster's directory (and its data) removed before the next.
    if "restart" not in args.skip and args.restart_gib:
        restart_curves(args.restart_gib, args.runs, curves.setdefault("restart", {}))
        report(curves, args.out, only="restart")
    if "kafka-restart" not in args.skip and args.kafka_restart_gib:
        kafka_restart_curves(args.kafka_restart_gib, args.runs, curves.setdefault("restart", {}))
        report(curves, args.out, only="restart")


def merge(curves: dict[str, Series], saved: dict[str, dict[str, list[list[Any]]]]) -> None:
    for curve, series in saved.items():
        for name, points in series.items():
            curves.setdefault(curve, {}).setdefault(name, []).extend(
                Point(int(x), tuple(float(v) for v in runs)) for x, runs in points
            )


def report(curves: dict[str, Series], out: Path, only: str | None = None) -> None:
    """A table, growth exponents and a PNG per curve with points (or the curve `only`)."""
    described = {
        "idle_cpu": ("Idle CPU of 3 brokers vs partitions (RF=3)", "CPU, % of a core, 3 brokers"),
        "rss": ("RSS per broker vs partitions (RF=3)", "MiB per broker"),
        "failover": ("Controller SIGKILL to every partition led", "seconds"),
        "shutdown": ("Controlled shutdown of a broker leading 1/3", "seconds"),
        "restart": ("Broker restart after SIGKILL vs data on its disk (RF=3)", "s from SIGKILL"),
    }
    for name, (title, unit) in described.items():
        series = {k: v for k, v in curves.get(name, {}).items() if v}
        if not series or only not in (None, name):
            continue
        x_name = "GiB" if name == "restart" else "partitions"
        print()
        print(table(title, x_name, series, unit))
        print()
        print(growth_note(series, _floors(name, series)))
        plot.draw(
            out / f"curve-{name.replace('_', '-')}.png",
            title,
            "GiB on the broker's disk" if name == "restart" else "partitions",
            unit,
            plotted(name, series),
            log_x=name != "restart",
        )


def plotted(name: str, series: Series) -> Series:
    """What the PNG draws: every series, but of the restart curve only the first and the last
    step of each system (the table has them all)."""
    if name != "restart":
        return series
    return {k: v for k, v in series.items() if k.split(": ")[-1] in restart.PLOTTED_STEPS}


def _floors(name: str, series: Series) -> dict[str, float]:
    """Failover waits out the dead controller's ZooKeeper session (6 s) before any work that
    grows with partitions: the growth is told above that floor."""
    return {k: 6.0 for k in series} if name == "failover" else {}
