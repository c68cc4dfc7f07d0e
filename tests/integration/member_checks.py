"""Consumer group members as processes (group_member.py), for test_group_members.py: start,
SIGKILL, SIGSTOP and stop them; read their logs (JSON lines, time.monotonic()) into ownership
intervals and check them (double ownership, records processed outside ownership, commits going
back, a fenced member's commits); a producer that records what was acknowledged; a sampler of
DescribeGroups and the committed offsets; waits for a settled group.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from client.admin import Admin
from client.producer import Producer
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import create_topic

__all__ = [
    "DEADLINE_S",
    "PARTITIONS",
    "Interval",
    "Load",
    "MemberProcess",
    "Members",
    "Owned",
    "Sampler",
    "all_processed",
    "assert_zombie_committed_nothing",
    "back_under_a_new_id",
    "committed_backwards",
    "create",
    "double_ownership",
    "first",
    "intervals",
    "logs_agree",
    "owned_by_pid",
    "processed_outside",
    "processed_values",
    "settled",
    "uncommitted",
]

PARTITIONS = 6  # of every test topic, each on all 3 brokers
DEADLINE_S = 60  # for conditions a test waits for (never a fixed sleep)
Owned = dict[str, frozenset[int]]  # member id -> partitions, as DescribeGroups shows them


# -- member processes and their logs -----------------------------------------------------------


@dataclass
class MemberProcess:
    name: str
    log: Path
    process: subprocess.Popen[bytes]
    trigger: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> float:
        """SIGKILL; returns a time.monotonic() by which it was dead."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        return time.monotonic()

    def stopped(self) -> bool:
        """In state T (stopped by a signal), per /proc."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def terminate(self) -> None:
        """SIGTERM (the member closes and leaves the group); SIGKILL if it hangs."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


@dataclass
class Members:
    """The test's member processes; every incarnation logs to `<directory>/<name>.jsonl`."""

    cluster: Cluster
    topic: str
    group: str
    directory: Path
    running: dict[str, MemberProcess] = field(default_factory=dict)
    all: list[MemberProcess] = field(default_factory=list)

    def spawn(self, name: str, process_ms: int = 0) -> MemberProcess:
        log, trigger = self.directory / f"{name}.jsonl", self.directory / f"{name}.stop"
        command = [
            *(sys.executable, "-m", "tests.integration.group_member"),
            *("--bootstrap", self.cluster.bootstrap, "--topic", self.topic),
            *("--group", self.group, "--log", str(log), "--name", name),
            *("--stop-trigger", str(trigger), "--process-ms", str(process_ms)),
        ]
        with (self.directory / f"{name}.stderr").open("ab") as stderr:
            process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=stderr, env=os.environ.copy()
            )
        member = MemberProcess(name, log, process, trigger)
        self.running[name] = member
        self.all.append(member)
        return member

    def stop_all(self) -> None:
        for member in self.running.values():
            member.terminate()
        self.running.clear()

    def events(self) -> list[dict[str, Any]]:
        """Every logged event of every incarnation, in time order."""
        found: list[dict[str, Any]] = []
        for path in sorted(self.directory.glob("*.jsonl")):
            for line in path.read_text().splitlines(keepends=True):
                if line.endswith("\n"):  # a SIGKILL may cut the last line short
                    found.append(json.loads(line))
        return sorted(found, key=lambda e: e["t"])

    def stderr(self) -> str:
        return "\n".join(
            f"--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.directory.glob("*.stderr"))
        )


def owned_by_pid(events: list[dict[str, Any]]) -> dict[int, set[int]]:
    """What each incarnation owns now by its own log."""
    owned: dict[int, set[int]] = {}
    for e in events:
        mine = owned.setdefault(e["pid"], set())
        if e["event"] == "assigned":
            mine |= set(e["partitions"])
        elif e["event"] in ("revoked", "lost"):
            mine -= set(e["partitions"])
    return owned


@dataclass(frozen=True)
class Interval:
    pid: int
    partition: int
    start: float
    end: float  # math.inf: still owned


def intervals(events: list[dict[str, Any]], ends: dict[int, float]) -> list[Interval]:
    """Ownership intervals from the members' logs (assigned .. revoked or lost); `ends[pid]`
    ends whatever that incarnation owned at that time (it was killed, or stopped: what it
    logs next, once continued, starts afresh)."""
    out: list[Interval] = []
    started: dict[tuple[int, int], float] = {}
    cut: set[int] = set()

    def close(pid: int, end: float) -> None:
        for pid_p in [k for k in started if k[0] == pid]:
            out.append(Interval(pid, pid_p[1], started.pop(pid_p), end))

    for e in events:
        pid = e["pid"]
        if pid in ends and pid not in cut and e["t"] >= ends[pid]:
            cut.add(pid)
            close(pid, ends[pid])
        for p in e.get("partitions", ()):
            if e["event"] == "assigned":
                started[(pid, p)] = e["t"]
            elif e["event"] in ("revoked", "lost") and (pid, p) in started:
                out.append(Interval(pid, p, started.pop((pid, p)), e["t"]))
    for pid in {pid for pid, _ in started}:
        close(pid, ends[pid] if pid in ends and pid not in cut else math.inf)
    return out


def double_ownership(spans: list[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of intervals of one partition, of two incarnations, that overlap in time."""
    clashes = []
    for p in range(PARTITIONS):
        ordered = sorted((s for s in spans if s.partition == p), key=lambda s: s.start)
        for i, a in enumerate(ordered):
            clashes += [(a, b) for b in ordered[i + 1 :] if b.start < a.end and b.pid != a.pid]
    return clashes


def processed_outside(
    events: list[dict[str, Any]], spans: list[Interval], exempt: dict[int, tuple[float, float]]
) -> list[dict[str, Any]]:
    """Processed batches logged by an incarnation outside its ownership of the partition
    (`exempt[pid]`: a window not checked, e.g. a fenced member's before it learns of it)."""
    outside = []
    for e in events:
        if e["event"] != "processed":
            continue
        window = exempt.get(e["pid"])
        if window is not None and window[0] <= e["t"] <= window[1]:
            continue
        if not any(
            s.pid == e["pid"] and s.partition == e["partition"] and s.start <= e["t"] <= s.end
            for s in spans
        ):
            outside.append(e)
    return outside


def processed_values(events: list[dict[str, Any]]) -> list[int]:
    return [int(v) for e in events if e["event"] == "processed" for v in e["values"]]


def uncommitted(events: list[dict[str, Any]], pid: int) -> set[int]:
    """The values an incarnation processed and never tried to commit (a commit it sent may
    have been acknowledged just before it was killed, unlogged)."""
    committed: dict[int, int] = {}
    for e in events:
        if e["pid"] == pid and e["event"] == "committing":
            for p, offset in e["offsets"].items():
                committed[int(p)] = max(committed.get(int(p), 0), offset)
    return {
        int(v)
        for e in events
        if e["pid"] == pid and e["event"] == "processed"
        and e["next_offset"] > committed.get(e["partition"], 0)
        for v in e["values"]
    }  # fmt: skip


def committed_backwards(events: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """(partition, before, after) where an acknowledged commit went below one acknowledged
    before it was even sent. (The coordinator applies a commit somewhere between its
    "committing" and "committed" lines: a member stopped in between logs the answer late.)"""
    sent: dict[int, float] = {}  # pid -> when its commit under way was sent
    acked: dict[int, list[tuple[float, float, int]]] = {}  # partition -> (sent, acked, offset)
    for e in events:
        if e["event"] == "committing":
            sent[e["pid"]] = e["t"]
        elif e["event"] == "committed":
            for p, offset in e["offsets"].items():
                acked.setdefault(int(p), []).append((sent[e["pid"]], e["t"], offset))
    back = []
    for p, commits in acked.items():
        by_ack = sorted(commits, key=lambda c: c[1])
        highest, i = 0, 0
        for began, _, offset in sorted(commits):
            while i < len(by_ack) and by_ack[i][1] < began:
                highest = max(highest, by_ack[i][2])
                i += 1
            if offset < highest:
                back.append((p, highest, offset))
    return back


# -- the producer and the sampler -------------------------------------------------------------


@dataclass
class Load:
    """A producer running until `done`: value str(seq), partition seq % PARTITIONS; `acked`
    holds what the cluster acknowledged (acks=all)."""

    cluster: Cluster
    topic: str
    done: trio.Event = field(default_factory=trio.Event)
    acked: dict[int, int] = field(default_factory=dict)  # seq -> offset
    finished: trio.Event = field(default_factory=trio.Event)

    async def run(self) -> None:
        try:
            async with Producer(self.cluster.bootstrap, linger_ms=5) as producer:
                seq = 0
                while not self.done.is_set():
                    sent = []
                    for _ in range(10):
                        value = str(seq).encode()
                        sent.append(
                            (
                                seq,
                                await producer.send(self.topic, value, partition=seq % PARTITIONS),
                            )
                        )
                        seq += 1
                    for s, future in sent:
                        self.acked[s] = (await future).offset
                    await trio.sleep(0.05)  # the rate (about 200 records/s), not a synchronisation
        finally:
            self.finished.set()

    async def stop(self) -> None:
        """Stop producing; returns once every record sent has its answer."""
        self.done.set()
        await self.finished.wait()


@dataclass
class Sampler:
    """DescribeGroups (and the committed offsets, with `offsets`) about every 100 ms until
    `done`: whether two members were ever shown owning one partition, and every committed
    offset sampled, with the times the answer was asked for and came."""

    admin: Admin
    group: str
    offsets: bool = False
    done: trio.Event = field(default_factory=trio.Event)
    samples: int = 0
    shared: list[tuple[float, Owned]] = field(default_factory=list)
    committed: dict[int, list[tuple[float, float, int]]] = field(default_factory=dict)

    async def run(self) -> None:
        while not self.done.is_set():
            asked = time.monotonic()
            (group,) = await self.admin.describe_groups([self.group])
            owned = {
                m.member_id: frozenset(tp.partition for tp in m.assignment) for m in group.members
            }
            every = [p for parts in owned.values() for p in parts]
            if len(every) != len(set(every)):
                self.shared.append((asked, owned))
            if self.offsets:
                found = await self.admin.list_group_offsets(self.group, high_watermarks=False)
                answered = time.monotonic()
                for o in found:
                    if o.committed_offset is not None:
                        samples = self.committed.setdefault(o.partition, [])
                        samples.append((asked, answered, o.committed_offset))
            self.samples += 1
            await trio.sleep(0.1)  # the sampling period

    def backwards(self) -> list[tuple[int, tuple[float, float, int], tuple[float, float, int]]]:
        """(partition, sample, next sample) where the committed offset went down."""
        return [
            (p, a, b)
            for p, samples in self.committed.items()
            for a, b in itertools.pairwise(samples)
            if b[2] < a[2]
        ]


async def settled(admin: Admin, group: str, members: int) -> Owned:
    """Wait until the group is Stable with `members` members that own every partition."""

    async def stable() -> Owned | None:
        (g,) = await admin.describe_groups([group])
        owned = {m.member_id: frozenset(tp.partition for tp in m.assignment) for m in g.members}
        union = {p for parts in owned.values() for p in parts}
        if g.state == "Stable" and len(owned) == members and union == set(range(PARTITIONS)):
            return owned
        return None

    return await eventually(stable, DEADLINE_S, f"{group} stable with {members} members")


async def logs_agree(members: Members, owned: Owned) -> dict[str, int]:
    """Wait until each running member's own log owns what DescribeGroups says of its member
    id; returns member id -> pid."""

    async def agree() -> dict[str, int] | None:
        events = members.events()
        ids = {e["member_id"]: e["pid"] for e in events if e["member_id"]}
        mine = owned_by_pid(events)
        if all(m in ids and mine.get(ids[m], set()) == parts for m, parts in owned.items()):
            return {m: ids[m] for m in owned}
        return None

    return await eventually(agree, DEADLINE_S, f"the members' logs agreeing with {owned}")


async def all_processed(members: Members, load: Load) -> list[int]:
    async def caught_up() -> list[int] | None:
        seen = processed_values(members.events())
        return seen if set(load.acked) <= set(seen) else None

    try:
        return await eventually(caught_up, DEADLINE_S, "every acknowledged record processed")
    except AssertionError:
        missing = sorted(set(load.acked) - set(processed_values(members.events())))
        raise AssertionError(f"{len(missing)} acknowledged records never processed: "
                             f"{missing[:20]}") from None  # fmt: skip


async def create(cluster: Cluster, topic: str) -> None:
    replicas = [[(p + i) % 3 + 1 for i in range(3)] for p in range(PARTITIONS)]
    await create_topic(cluster, topic, replicas)


def first(
    events: list[dict[str, Any]], pid: int, event: str, after: float
) -> dict[str, Any] | None:
    return next((e for e in events if e["pid"] == pid and e["event"] == event
                 and e["t"] > after), None)  # fmt: skip


async def back_under_a_new_id(
    admin: Admin, members: Members, member: MemberProcess, old_id: str
) -> str:
    """Wait until `member` (its process) is in the group again, Stable, under a new id."""

    async def rejoined() -> str | None:
        ids = {e["member_id"] for e in members.events() if e["pid"] == member.pid}
        (g,) = await admin.describe_groups([members.group])
        found = {m.member_id for m in g.members} & (ids - {"", old_id})
        return next(iter(found), None) if g.state == "Stable" else None

    return await eventually(rejoined, DEADLINE_S, f"{member.name} back under a new id")


def assert_zombie_committed_nothing(
    events: list[dict[str, Any]], pid: int, stopped_t: float, lost_t: float
) -> None:
    """Each commit a fenced member began between its stop and learning of the fence (the
    lost listener) was refused (one begun before the stop may have been accepted)."""
    mine = [e for e in events if e["pid"] == pid and stopped_t < e["t"] <= lost_t]
    for i, e in enumerate(mine):
        if e["event"] == "committing":
            results = [r for r in mine[i + 1 :] if r["event"] in ("committed", "commit_failed")]
            assert not results or results[0]["event"] == "commit_failed", (e, results[0])
    assert [e for e in mine if e["event"] in ("revoked", "assigned")] == [], mine
