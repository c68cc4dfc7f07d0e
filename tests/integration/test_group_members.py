"""Consumer group members as separate processes (group_member.py) on a real 3-broker cluster,
a producer running throughout: no partition ever has two owners (the members' own logs, with
times, and DescribeGroups samples); a fourth member moves only what it gets; a SIGKILLed
member's partitions move after its session timeout; a SIGSTOPped member is fenced and its late
commit refused; members SIGKILLed and restarted lose no acknowledged record, and committed
offsets never go back but by an explicit reset. One cluster for the module.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.producer import Producer
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    running_cluster,
    whole_cluster_around,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
SESSION_TIMEOUT_MS = 4000  # short, so fencing is quick; long enough for a loaded machine
KILLS = 4  # SIGKILL and restart rounds in the at-least-once test
PROCESS_MS = 300  # there, what processing a batch takes: kills land before its commit
DEADLINE_S = 60  # for conditions a test waits for (never a fixed sleep)
OVERRIDES = {
    **FAST_REPLICATION,
    "offsets.topic.num.partitions": "3",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
}
Owned = dict[str, frozenset[int]]  # member id -> partitions, as DescribeGroups shows them


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("members"), OVERRIDES) as c:
        yield c


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


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
    """(partition, before, after) where an acknowledged commit (by any member, in the order
    the members logged them) went below an earlier one."""
    last: dict[int, int] = {}
    back = []
    for e in events:
        if e["event"] == "committed":
            for p, offset in e["offsets"].items():
                if offset < last.get(int(p), 0):
                    back.append((int(p), last[int(p)], offset))
                last[int(p)] = max(last.get(int(p), 0), offset)
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


# -- the tests ---------------------------------------------------------------------------------


async def test_three_members_a_fourth_joins_and_one_is_killed(
    cluster: Cluster, tmp_path: Path
) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    topic = group = "owners"
    await create(cluster, topic)
    members = Members(cluster, topic, group, tmp_path)
    ends: dict[int, float] = {}
    try:
        async with Admin(cluster.bootstrap) as admin, trio.open_nursery() as nursery:
            load, sampler = Load(cluster, topic), Sampler(admin, group)
            nursery.start_soon(load.run)
            nursery.start_soon(sampler.run)
            for i in range(3):
                members.spawn(f"m{i}")
            three = await settled(admin, group, 3)
            pids = await logs_agree(members, three)
            assert sorted(len(parts) for parts in three.values()) == [2, 2, 2], three

            joined_t = time.monotonic()
            members.spawn("m3")
            four = await settled(admin, group, 4)
            pids.update(await logs_agree(members, four))
            (new,) = set(four) - set(three)
            given = four[new]
            assert all(four[m] <= three[m] for m in three), (three, four)  # nothing else moved
            assert set().union(*(three[m] - four[m] for m in three)) == given, (three, four)
            after_join = [e for e in members.events() if e["t"] > joined_t]
            old_moves = {(e["event"], p) for e in after_join if e["pid"] != pids[new]
                         for p in e.get("partitions", ())}  # fmt: skip
            assert old_moves == {("revoked", p) for p in given}, after_join

            victim_id = rng.choice(sorted(three))
            victim = next(m for m in members.all if m.pid == pids[victim_id])
            lost = four[victim_id]
            killed_t = ends[victim.pid] = victim.kill()
            del members.running[victim.name]
            final = await settled(admin, group, 3)
            assert victim_id not in final
            assert all(four[m] <= final[m] for m in final), (four, final)  # only its moved
            assert set().union(*(final[m] - four[m] for m in final)) == lost
            await logs_agree(members, final)
            moved_t = max(
                e["t"]
                for e in members.events()
                if e["event"] == "assigned" and e["t"] > killed_t and set(e["partitions"]) & lost
            )
            print(
                f"killed {victim.name} ({victim_id}): {sorted(lost)} moved "
                f"{moved_t - killed_t:.2f} s later (session timeout {SESSION_TIMEOUT_MS} ms)"
            )
            await load.stop()
            await all_processed(members, load)
            sampler.done.set()
    except BaseException:
        print(members.stderr())
        raise
    finally:
        members.stop_all()
    events = members.events()
    spans = intervals(events, ends)
    assert double_ownership(spans) == []
    assert processed_outside(events, spans, {}) == []
    assert committed_backwards(events) == []
    assert sampler.samples >= 10 and sampler.shared == []
    assert load.acked, "the producer was acknowledged nothing"


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


async def test_stopped_members_are_fenced_and_their_late_commits_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    """First a member SIGSTOPs itself between processing a batch and committing it: after
    SIGCONT that late commit must be refused. (A SIGSTOP from outside lands at a random point,
    mostly while poll() waits: the heartbeat then learns of the fence before any commit.) Then
    a SIGSTOP from outside, wherever the member is."""
    topic = group = "stopped"
    await create(cluster, topic)
    members = Members(cluster, topic, group, tmp_path)
    try:
        async with Admin(cluster.bootstrap) as admin, trio.open_nursery() as nursery:
            load, sampler = Load(cluster, topic), Sampler(admin, group, offsets=True)
            nursery.start_soon(load.run)
            nursery.start_soon(sampler.run)
            for i in range(3):
                members.spawn(f"s{i}")
            await logs_agree(members, await settled(admin, group, 3))
            victim = members.running["s0"]
            victim.trigger.touch()

            async def self_stopped() -> dict[str, Any] | None:
                return (
                    first(members.events(), victim.pid, "stopping", 0) if victim.stopped() else None
                )

            stop = await eventually(self_stopped, DEADLINE_S, "the member stopping itself")
            old_id, late = stop["member_id"], {int(p): o for p, o in stop["offsets"].items()}
            held = owned_by_pid([e for e in members.events() if e["t"] <= stop["t"]])[victim.pid]
            assert held, "the stopped member owned nothing"
            assert old_id not in await settled(admin, group, 2)
            print(f"{old_id} fenced {time.monotonic() - stop['t']:.2f} s after it stopped")

            async def overtaken() -> bool:
                """Its late commit would now move the committed offsets backwards."""
                found = await admin.list_group_offsets(group, high_watermarks=False)
                now = {o.partition: o.committed_offset for o in found}
                return all((now.get(p) or 0) > offset for p, offset in late.items())

            await eventually(overtaken, DEADLINE_S, "the new owners committing past it")
            victim.process.send_signal(signal.SIGCONT)
            new_id = await back_under_a_new_id(admin, members, victim, old_id)

            # From outside: wherever it is, it stops.
            other = members.running["s1"]
            events = members.events()
            other_id = next(e["member_id"] for e in reversed(events) if e["pid"] == other.pid)
            other.process.send_signal(signal.SIGSTOP)

            async def stopped() -> bool:
                return other.stopped()

            await eventually(stopped, DEADLINE_S, "s1 in state T")
            paused_t = time.monotonic()
            held_by_other = owned_by_pid(members.events())[other.pid]
            assert held_by_other, "s1 owned nothing"
            assert other_id not in await settled(admin, group, 2)
            other.process.send_signal(signal.SIGCONT)
            other_new_id = await back_under_a_new_id(admin, members, other, other_id)
            await load.stop()
            await all_processed(members, load)
            sampler.done.set()
    except BaseException:
        print(members.stderr())
        raise
    finally:
        members.stop_all()
    events = members.events()
    continued = first(events, victim.pid, "continued", stop["t"])
    lost = first(events, victim.pid, "lost", stop["t"])
    assert continued is not None and lost is not None
    refused = first(events, victim.pid, "commit_failed", stop["t"])
    assert refused is not None and refused["t"] < lost["t"], (refused, lost)
    assert {k: refused.get(k) for k in ("member_id", "error", "code", "offsets")} == {
        "member_id": old_id, "error": "CommitFailedError", "code": "UNKNOWN_MEMBER_ID",
        "offsets": {str(p): o for p, o in late.items()},
    }, refused  # fmt: skip
    assert set(lost["partitions"]) == held
    assert_zombie_committed_nothing(events, victim.pid, stop["t"], lost["t"])
    assert first(events, victim.pid, "assigned", lost["t"]) is not None, new_id

    other_lost = first(events, other.pid, "lost", paused_t)
    assert other_lost is not None and set(other_lost["partitions"]) == held_by_other
    assert_zombie_committed_nothing(events, other.pid, paused_t, other_lost["t"])
    assert first(events, other.pid, "assigned", other_lost["t"]) is not None, other_new_id

    ends = {victim.pid: stop["t"], other.pid: paused_t}
    exempt = {victim.pid: (stop["t"], lost["t"]), other.pid: (paused_t, other_lost["t"])}
    spans = intervals(events, ends)
    assert double_ownership(spans) == []
    assert processed_outside(events, spans, exempt) == []
    assert committed_backwards(events) == []
    assert sampler.samples >= 10 and sampler.shared == [] and sampler.backwards() == []


async def test_members_killed_and_restarted_lose_no_acknowledged_record(
    cluster: Cluster, tmp_path: Path
) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    topic = group = "at-least-once"
    await create(cluster, topic)
    members = Members(cluster, topic, group, tmp_path)
    ends: dict[int, float] = {}
    try:
        async with Admin(cluster.bootstrap) as admin, trio.open_nursery() as nursery:
            load, sampler = Load(cluster, topic), Sampler(admin, group, offsets=True)
            nursery.start_soon(load.run)
            nursery.start_soon(sampler.run)
            for i in range(3):
                members.spawn(f"a{i}", PROCESS_MS)
            await settled(admin, group, 3)
            for _ in range(KILLS):
                victim = members.running[rng.choice(sorted(members.running))]
                batches = rng.randint(1, 4)

                def logged(pid: int, event: str) -> int:
                    return sum(e["pid"] == pid and e["event"] == event for e in members.events())

                async def busy(pid: int = victim.pid, count: int = batches) -> bool:
                    return logged(pid, "processed") >= count

                await eventually(busy, DEADLINE_S, f"{victim.name} processing {batches} batches")
                ends[victim.pid] = victim.kill()
                again = members.spawn(victim.name, PROCESS_MS)

                async def working(pid: int = again.pid) -> bool:
                    return logged(pid, "processed") > 0

                await eventually(working, DEADLINE_S, f"{victim.name} restarted and working")
            await settled(admin, group, 3)  # the killed incarnations' sessions are over
            await load.stop()
            seen = await all_processed(members, load)
            ends_of = {p: 1 + max(o for s, o in load.acked.items() if s % PARTITIONS == p)
                       for p in range(PARTITIONS)}  # fmt: skip

            async def all_committed() -> bool:
                found = await admin.list_group_offsets(group, high_watermarks=False)
                return {o.partition: o.committed_offset for o in found} == ends_of

            await eventually(all_committed, DEADLINE_S, f"committed offsets reaching {ends_of}")
            # An explicit reset, once the group is empty: the only way back, and one the
            # sampler must see (it can see offsets go back).
            members.stop_all()

            async def empty() -> bool:
                (g,) = await admin.describe_groups([group])
                return g.state == "Empty"

            await eventually(empty, DEADLINE_S, "the group empty")
            reset_from = time.monotonic()
            await admin.alter_group_offsets(group, {(topic, p): 0 for p in range(PARTITIONS)})
            reset_to = time.monotonic()

            async def reset_seen() -> bool:
                return all(
                    s[-1][0] > reset_to and s[-1][2] == 0 for s in sampler.committed.values()
                )

            await eventually(reset_seen, DEADLINE_S, "the sampler seeing the reset")
            sampler.done.set()
    except BaseException:
        print(members.stderr())
        raise
    finally:
        members.stop_all()
    events = members.events()
    duplicates = len(seen) - len(set(seen))
    print(
        f"{len(load.acked)} records acknowledged, {len(set(seen))} processed ({duplicates} again)"
    )
    assert set(seen) == set(load.acked)  # nothing processed that was not acknowledged either
    # What a killed member processed but had not committed was processed again, later.
    redone = 0
    for pid, killed_t in ends.items():
        unsaved = uncommitted(events, pid)
        later = {int(v) for e in events if e["event"] == "processed" and e["t"] > killed_t
                 for v in e["values"]}  # fmt: skip
        assert unsaved <= later, sorted(unsaved - later)
        redone += bool(unsaved)
    print(f"{redone} of {KILLS} kills came between processing and committing")
    assert redone > 0, "no kill landed before a commit: the redelivery path went untested"
    spans = intervals(events, ends)
    assert double_ownership(spans) == []
    assert processed_outside(events, spans, {}) == []
    assert committed_backwards(events) == []
    backwards = sampler.backwards()
    assert sorted({p for p, _, _ in backwards}) == list(range(PARTITIONS)), backwards
    unexplained = [
        (p, a, b) for p, a, b in backwards if not (a[0] <= reset_to and b[1] >= reset_from)
    ]
    assert unexplained == [], (reset_from, reset_to)
