"""Pure: the "race Apache Kafka" goal table. Each line: Highwater's figure (median and range
over runs), Kafka's, Highwater / Kafka, what the goal compares Highwater with (Kafka, the
no-work trio floor of a round, or the build-only ceiling), that ratio, the goal and whether
the medians meet it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tests.benchmarks.peers.table import HIGHWATER, KAFKA, Spread, cell, ratio

# The extra figures one run records beside table.ROWS's (run.py):
BROKER_CPU = "broker_cpu"  # the 3 brokers' cores over the end-to-end phase (not ZooKeeper)
LEADER_CPU = "leader_cpu"  # the leader's (broker 1's) cores over that phase
ROUNDS_PER_S = "rounds_per_s"  # Produce requests the leader served a second in that phase
FLOOR_TRIO = "floor_trio"  # round_floor's 3 trio processes at that rate (cores)
FLOOR_PLAIN = "floor_plain"  # round_floor's 3 epoll loops at that rate (cores)
FLOOR_TRIO_LEADER_US = "floor_trio_leader_us"  # round_floor's trio leader: CPU µs per round
# The end-to-end phase's records over its wall time, the clients' start and the last records'
# delivery included: a lower bound on the rate the producer sent at (it paces to 10,000/s).
E2E_RATE = "e2e_rate"
BUILD_ONLY = "build_only"  # `perf produce`'s build-only ceiling (rec/s) in this process

CPU_FLOOR_BOUND = 1.5
BUILD_ONLY_BOUND = 0.8


@dataclass(frozen=True)
class GoalLine:
    label: str
    unit: str
    highwater: Spread | None
    kafka: Spread | None
    reference: Spread | None  # what the goal divides Highwater's median by
    reference_name: str
    bound: float
    at_least: bool  # the ratio must be >= bound (else <= bound)

    @property
    def goal_text(self) -> str:
        sign = ">=" if self.at_least else "<="
        return f"{HIGHWATER} / {self.reference_name} {sign} {self.bound:g}"

    @property
    def ratio_to_kafka(self) -> float | None:
        if self.highwater is None or self.kafka is None:
            return None
        return ratio(self.highwater.median, self.kafka.median)

    @property
    def ratio_to_reference(self) -> float | None:
        if self.highwater is None or self.reference is None:
            return None
        return ratio(self.highwater.median, self.reference.median)

    @property
    def met(self) -> bool | None:
        """None when a figure is missing (that system or phase did not run)."""
        quotient = self.ratio_to_reference
        if quotient is None:
            return None
        return quotient >= self.bound if self.at_least else quotient <= self.bound


def rounds_per_s(produce_before: float, produce_after: float, elapsed_s: float) -> float:
    """The leader's Produce requests a second over a phase, from its request counter read
    before and after: at `linger.ms` 0 each Produce is one acks=all round (the Produce, each
    follower's fetch of it, the consumer's fetch), the unit round_floor paces."""
    if elapsed_s <= 0:
        raise ValueError("elapsed_s must be positive")
    if produce_after < produce_before:
        raise ValueError("the request counter went backwards (a broker restarted?)")
    return (produce_after - produce_before) / elapsed_s


def leader_us_per_round(leader_cores: float, rounds_per_s: float) -> float:
    """The leader's CPU µs per round (per Produce) over a phase, to set beside the floor's."""
    return leader_cores / rounds_per_s * 1e6 if rounds_per_s > 0 else 0.0


def _spread(runs: Sequence[Mapping[str, float]] | None, key: str) -> Spread | None:
    values = [r[key] for r in runs or () if key in r]
    return Spread.of(values) if values else None


def lines(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> list[GoalLine]:
    """The issue's five goals (the latency goal as three lines: p50, p99, p99.9)."""
    mine, kafka = runs.get(HIGHWATER), runs.get(KAFKA)

    def versus_kafka(key: str, label: str, unit: str, at_least: bool) -> GoalLine:
        theirs = _spread(kafka, key)
        return GoalLine(label, unit, _spread(mine, key), theirs, theirs, KAFKA, 1.0, at_least)

    return [
        versus_kafka("produce", "RF=3 acks=all produce, 100 B records", "rec/s", True),
        versus_kafka("consume", "consume", "rec/s", True),
        versus_kafka("p50", "end-to-end p50 at 10,000 rec/s", "ms", False),
        versus_kafka("p99", "end-to-end p99 at 10,000 rec/s", "ms", False),
        versus_kafka("p99.9", "end-to-end p99.9 at 10,000 rec/s", "ms", False),
        GoalLine(
            "brokers' CPU at 10,000 rec/s",
            "cores",
            _spread(mine, BROKER_CPU),
            _spread(kafka, BROKER_CPU),
            _spread(mine, FLOOR_TRIO),
            "trio floor",
            CPU_FLOOR_BOUND,
            False,
        ),
        GoalLine(
            "produce / build-only ceiling",
            "rec/s",
            _spread(mine, "produce"),
            None,
            _spread(mine, BUILD_ONLY),
            "build-only",
            BUILD_ONLY_BOUND,
            True,
        ),
    ]


def _cell(spread: Spread | None, unit: str) -> str:
    if spread is None:
        return "-"
    return cell(spread, unit, 2 if spread.low != spread.high else 1)


def _quotient(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else "met" if met else "MISSED"


def render(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> str:
    """The goal table, then the floor's detail: the rate it ran at and the epoll floor."""
    header = [
        "goal row",
        HIGHWATER,
        KAFKA,
        f"{HIGHWATER} / {KAFKA}",
        "compared with",
        "ratio",
        "goal",
        "",
    ]
    table = [header]
    for line in lines(runs):
        table.append(
            [
                f"{line.label} ({line.unit})",
                _cell(line.highwater, line.unit),
                _cell(line.kafka, line.unit),
                _quotient(line.ratio_to_kafka),
                f"{line.reference_name} {_cell(line.reference, line.unit)}",
                _quotient(line.ratio_to_reference),
                line.goal_text,
                _verdict(line.met),
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    mine = runs.get(HIGHWATER)
    rate, trio, plain = (_spread(mine, k) for k in (ROUNDS_PER_S, FLOOR_TRIO, FLOOR_PLAIN))
    if rate is not None:
        text.append(
            f"the floor's rate: the leader's Produce requests a second in the end-to-end phase, "
            f"{_cell(rate, 'rec/s')} rounds/s; the no-work floor at that rate: trio "
            f"{_cell(trio, 'cores')} cores, plain epoll {_cell(plain, 'cores')} cores"
        )
    paces = [(system, _spread(figures, E2E_RATE)) for system, figures in runs.items()]
    shown = [f"{system} {_cell(pace, 'rec/s')}" for system, pace in paces if pace is not None]
    if shown:
        text.append(
            "end-to-end records over the phase's wall time (clients' start and drain included, "
            f"so at most the 10,000 rec/s sent): {', '.join(shown)} rec/s"
        )
    leader = [
        leader_us_per_round(r[LEADER_CPU], r[ROUNDS_PER_S])
        for r in mine or ()
        if LEADER_CPU in r and ROUNDS_PER_S in r
    ]
    floor_leader = _spread(mine, FLOOR_TRIO_LEADER_US)
    if leader and floor_leader is not None:
        text.append(
            f"the leader's CPU per round: {_cell(Spread.of(leader), 'rec/s')} µs, of which the "
            f"trio floor's leader {_cell(floor_leader, 'rec/s')} µs"
        )
    text.append("medians (ranges in brackets); met or missed on the medians")
    return "\n".join(t.rstrip() for t in text)


def document(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> list[dict[str, object]]:
    """The goal table for --json."""

    def spread(value: Spread | None) -> dict[str, float] | None:
        return None if value is None else vars(value)

    return [
        {
            "row": line.label,
            "unit": line.unit,
            "highwater": spread(line.highwater),
            "kafka": spread(line.kafka),
            "highwater_over_kafka": line.ratio_to_kafka,
            "compared_with": line.reference_name,
            "reference": spread(line.reference),
            "ratio": line.ratio_to_reference,
            "goal": line.goal_text,
            "met": line.met,
        }
        for line in lines(runs)
    ]
