"""Consumer group members as separate processes (group_member.py) on a real 3-broker cluster,
a producer running throughout: no partition ever has two owners (the members' own logs, with
times, and DescribeGroups samples); a fourth member moves only what it gets; a SIGKILLed
member's partitions move after its session timeout; a SIGSTOPped member is fenced and its late
commit refused; members SIGKILLed and restarted lose no acknowledged record, and committed
offsets never go back but by an explicit reset. One cluster for the module.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.member_checks import (
    DEADLINE_S,
    PARTITIONS,
    Load,
    Members,
    Sampler,
    all_processed,
    assert_zombie_committed_nothing,
    back_under_a_new_id,
    committed_backwards,
    create,
    double_ownership,
    first,
    intervals,
    logs_agree,
    owned_by_pid,
    processed_outside,
    settled,
    uncommitted,
)
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    running_cluster,
    whole_cluster_around,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SESSION_TIMEOUT_MS = 4000  # short, so fencing is quick; long enough for a loaded machine
KILLS = 4  # SIGKILL and restart rounds in the at-least-once test
PROCESS_MS = 300  # there, what processing a batch takes: kills land before its commit
OVERRIDES = {
    **FAST_REPLICATION,
    "offsets.topic.num.partitions": "3",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
}


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("members"), OVERRIDES) as c:
        yield c


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


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
    assert "this member is no longer in the group" in refused["message"], refused
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
