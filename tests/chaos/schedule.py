"""The nemesis's plan, pure: which faults a step injects, on whom, when, and for how long; and
the ledger of what was active when, which counts overlaps and checks that all were healed.

A step is one fault, or two that overlap: the second starts while the first is still active
(its delay is below the first's shortest hold). Pairs are drawn from the enabled kinds (two
broker faults on two different brokers; corrupt never pairs, it destroys data) or are one of
the named pairs (PAIRS: the leader killed while a follower is paused, the controller's session
expiring during a reassignment). docs/reliability.md ("Soak") describes the schedule.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "BROKER_KINDS",
    "EXCLUSIVE",
    "HOLD_S",
    "KINDS",
    "PAIRS",
    "Fault",
    "Ledger",
    "Step",
    "can_pair",
    "plan_step",
]

KINDS = (
    "kill",
    "pause",
    "expire",
    "bounce",
    "corrupt",
    "partition",
    "lose-acks",
    "reassign",
    "elect",
)
BROKER_KINDS = frozenset({"kill", "pause", "expire", "bounce", "corrupt", "partition"})
"""Kinds that act on one broker; the others act on the cluster (proxies, the controller)."""
EXCLUSIVE = frozenset({"corrupt"})
"""Never paired: damaged files on one replica while another is down could lose acked records
outside the promise (acks=all, min.insync.replicas=2 survive one lost replica, not two)."""

# Per kind, how long the fault holds before it is healed (seconds; expire and long partitions
# add the ZooKeeper session timeout). Kinds that take their own time (bounce waits for the
# controlled shutdown, corrupt for the kill, reassign for the moves, elect for the answer)
# have (0, 0): they are active until they return.
HOLD_S: dict[str, tuple[float, float]] = {
    "kill": (0.5, 3.0),
    "pause": (0.3, 1.5),
    "expire": (0.5, 1.5),
    "bounce": (0.0, 0.0),
    "corrupt": (0.0, 0.0),
    "partition": (1.0, 3.0),
    "lose-acks": (1.0, 3.0),
    "reassign": (0.0, 0.0),
    "elect": (0.0, 0.0),
}
_SESSION_KINDS = frozenset({"expire"})  # the session timeout is added to the hold

PAIRS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    # name: ((first kind, role), (second kind, role)); the second starts during the first.
    "follower-paused-leader-killed": (("pause", "follower"), ("kill", "leader")),
    "controller-expired-during-reassign": (("reassign", "cluster"), ("expire", "controller")),
}
ROLES = ("any", "controller", "leader")


@dataclass(frozen=True)
class Fault:
    kind: str
    role: str  # any, controller, leader (of the step's partition), follower (of it), cluster
    delay_s: float  # after the step begins
    hold_s: float


@dataclass(frozen=True)
class Step:
    name: str  # the kind, a pair's name, or "a+b" for a drawn pair
    partition: int  # whose leader/followers the roles mean, or which one reassign moves
    faults: tuple[Fault, ...]

    @property
    def overlapping(self) -> bool:
        return len(self.faults) > 1


def can_pair(first: str, second: str) -> bool:
    """May `second` start while `first` is active? Broker faults go to different brokers."""
    if first in EXCLUSIVE or second in EXCLUSIVE:
        return False
    # Two of the cluster-wide kinds at once say little more than each alone, and two
    # reassignments of one partition would refuse each other.
    return first in BROKER_KINDS or second in BROKER_KINDS


def _hold(kind: str, rng: random.Random, session_s: float) -> float:
    low, high = HOLD_S[kind]
    extra = session_s if kind in _SESSION_KINDS else 0.0
    if kind == "partition" and rng.random() < 0.5:
        extra = session_s + 0.5  # past its session: it expires and must rejoin
    return extra + rng.uniform(low, high)


def _min_active_s(kind: str, session_s: float) -> float:
    """The least time a fault of `kind` stays active (bounce, corrupt, reassign and elect
    take real time that is not planned here: at least a moment)."""
    low = HOLD_S[kind][0] + (session_s if kind in _SESSION_KINDS else 0.0)
    return max(low, 0.2)


def plan_step(
    rng: random.Random,
    kinds: Sequence[str],
    partitions: int,
    *,
    overlap_share: float,
    session_s: float,
) -> Step:
    """One step: a single fault, or (with probability `overlap_share`, when the kinds allow)
    two that overlap, a named pair when its kinds are enabled or a drawn one."""
    enabled = sorted(set(kinds))
    partition = rng.randrange(partitions)
    if rng.random() < overlap_share:
        named = [n for n, pair in PAIRS.items() if all(k in enabled for (k, _) in pair)]
        drawn = [(a, b) for a in enabled for b in enabled if can_pair(a, b)]
        if named and (not drawn or rng.random() < 0.4):
            name = rng.choice(sorted(named))
            (k1, r1), (k2, r2) = PAIRS[name]
            return Step(name, partition, _pair(rng, k1, r1, k2, r2, session_s))
        if drawn:
            a, b = rng.choice(drawn)
            r1 = rng.choice(ROLES) if a in BROKER_KINDS else "cluster"
            r2 = rng.choice(ROLES) if b in BROKER_KINDS else "cluster"
            return Step(f"{a}+{b}", partition, _pair(rng, a, r1, b, r2, session_s))
    kind = rng.choice(enabled)
    role = rng.choice(ROLES) if kind in BROKER_KINDS else "cluster"
    return Step(kind, partition, (Fault(kind, role, 0.0, _hold(kind, rng, session_s)),))


def _pair(
    rng: random.Random, k1: str, r1: str, k2: str, r2: str, session_s: float
) -> tuple[Fault, Fault]:
    first = Fault(k1, r1, 0.0, _hold(k1, rng, session_s))
    # The second starts while the first is surely still active: before its shortest hold.
    delay_s = rng.uniform(0.05, 0.8) * _min_active_s(k1, session_s)
    return first, Fault(k2, r2, delay_s, _hold(k2, rng, session_s))


@dataclass
class _Entry:
    number: int
    kind: str
    target: str
    started_s: float
    healed_s: float | None = None
    overlapped: set[int] = field(default_factory=set)


@dataclass
class Ledger:
    """What was injected and healed when (times from the caller's clock): a fault started
    while another is active overlaps it."""

    entries: list[_Entry] = field(default_factory=list)

    def start(self, kind: str, target: str, now_s: float) -> int:
        number = len(self.entries)
        entry = _Entry(number, kind, target, now_s)
        for other in self.active():
            other.overlapped.add(number)
            entry.overlapped.add(other.number)
        self.entries.append(entry)
        return number

    def heal(self, number: int, now_s: float) -> None:
        entry = self.entries[number]
        if entry.healed_s is not None:
            raise ValueError(f"fault {number} ({entry.kind}) healed twice")
        entry.healed_s = now_s

    def active(self) -> list[_Entry]:
        return [e for e in self.entries if e.healed_s is None]

    @property
    def overlapping(self) -> int:
        """Faults that started while another was active (a pair counts once)."""
        return sum(1 for e in self.entries if any(o < e.number for o in e.overlapped))

    def by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.entries:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return dict(sorted(counts.items()))

    def overlapping_pairs(self) -> dict[str, int]:
        """'first+second' -> how many times the second started during the first."""
        pairs: dict[str, int] = {}
        for e in self.entries:
            for o in sorted(e.overlapped):
                if o < e.number:
                    name = f"{self.entries[o].kind}+{e.kind}"
                    pairs[name] = pairs.get(name, 0) + 1
        return dict(sorted(pairs.items()))

    def heal_order(self) -> list[int]:
        """Healed faults by heal time (ties by number)."""
        healed = [e for e in self.entries if e.healed_s is not None]
        return [e.number for e in sorted(healed, key=lambda e: (e.healed_s, e.number))]
