"""The consumer in a group against the fake cluster's fake coordinator (fake_coordinator.py):
joining, committed offsets, commits, rebalances with the listener, fencing, coordinator moves,
leaving, the poll interval."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

import pytest
import trio

from client.consumer import Consumer, ConsumerRecord, OffsetAndMetadata, RebalanceListener
from client.consumer.commits import ADMIN_MEMBER, commit_offsets
from client.consumer.coordinator import Coordinator
from client.errors import ClientClosedError, CommitFailedError, HighwaterClientError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
)
from protocol.topic_partition import TopicPartition
from tests.unit.client.fake_broker import FakeCluster
from tests.unit.client.test_consumer import fill

DEADLINE_S = 10


def group_consumer(cluster: FakeCluster, group: str = "g", **options: object) -> Consumer:
    settings: dict[str, object] = {
        "auto_offset_reset": "earliest",
        "auto_commit_interval_ms": 200,
        "fetch_max_wait_ms": 100,
        **options,
    }
    return Consumer(cluster.bootstrap, group_id=group, **settings)  # type: ignore[arg-type]


async def until(condition: Callable[[], object], what: str) -> None:
    """Wait for `condition` (background tasks make it true), checking every 10 ms."""
    for _ in range(DEADLINE_S * 100):
        if condition():
            return
        await trio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def poll_until(
    consumer: Consumer, done: Callable[[list[ConsumerRecord]], bool]
) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with trio.fail_after(DEADLINE_S):
        while not done(out):
            out.extend(await consumer.poll(timeout_ms=50))
    return out


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))


def tps(*partitions: int, topic: str = "t") -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


async def test_a_member_resumes_from_the_committed_offsets_and_commits_on_close(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 2)
    fill(cluster, "t", 0, 2, 5)
    fill(cluster, "t", 1, 2, 5)
    cluster.coordinator.commit_as_admin("g", {TopicPartition("t", 0): 7})
    listener = Recorder()
    async with group_consumer(cluster) as consumer:
        consumer.subscribe(["t"], listener=listener)
        records = await poll_until(consumer, lambda rs: len(rs) >= 13)
        assert [r.offset for r in records if r.partition == 0] == [7, 8, 9]  # committed
        assert [r.offset for r in records if r.partition == 1] == list(range(10))  # earliest
        assert consumer.assignment() == tps(0, 1)
        assert listener.calls == [("assigned", tps(0, 1))]
        member = consumer.group_metadata()
        assert member is not None and member.member_id and member.state == "stable"
    assert cluster.coordinator.member_ids("g") == set()  # it left
    assert cluster.coordinator.committed("g") == {
        TopicPartition("t", 0): 10,
        TopicPartition("t", 1): 10,
    }
    assert listener.calls[-1] == ("revoked", tps(0, 1))
    fill(cluster, "t", 0, 1, 3)
    async with group_consumer(cluster) as again:
        again.subscribe(["t"])
        more = await poll_until(again, lambda rs: len(rs) >= 3)
        assert [(r.partition, r.offset) for r in more] == [(0, 10), (0, 11), (0, 12)]


async def test_the_committed_offset_s_leader_epoch_is_validated(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    fill(cluster, "t", 0, 2, 5)
    cluster.coordinator.commit_as_admin("g", {TopicPartition("t", 0): 5}, leader_epoch=0)
    cluster.bump_leader_epoch("t", 0)
    async with group_consumer(cluster) as consumer:
        consumer.subscribe(["t"])
        records = await poll_until(consumer, lambda rs: len(rs) >= 5)
        assert [r.offset for r in records] == list(range(5, 10))
    assert cluster.validations() == [(1, 0, 1)]  # OffsetForLeaderEpoch for epoch 0, current 1


async def test_two_members_split_the_partitions_never_sharing_one(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 4)
    for p in range(4):
        fill(cluster, "t", p, 1, 10)
    first_listener, second_listener = Recorder(), Recorder()
    shared: list[dict[TopicPartition, list[str]]] = []

    async def watch(cancel: trio.CancelScope) -> None:
        with cancel:
            while True:
                owners = cluster.coordinator.owners("g")
                shared.extend([owners] if any(len(v) > 1 for v in owners.values()) else [])
                await trio.sleep(0.005)

    async with (
        group_consumer(cluster) as first,
        group_consumer(cluster) as second,
        trio.open_nursery() as nursery,
    ):
        watching = trio.CancelScope()
        nursery.start_soon(watch, watching)
        first.subscribe(["t"], listener=first_listener)
        got = await poll_until(first, lambda rs: len(rs) >= 40)
        assert first.assignment() == tps(0, 1, 2, 3)
        await first.commit()
        second.subscribe(["t"], listener=second_listener)

        async def keep_polling(consumer: Consumer, stop: trio.Event) -> None:
            while not stop.is_set():
                got.extend(await consumer.poll(timeout_ms=20))

        stop = trio.Event()
        nursery.start_soon(keep_polling, first, stop)
        nursery.start_soon(keep_polling, second, stop)
        await until(
            lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2, "a split"
        )
        stop.set()
        watching.cancel()
    assert shared == []  # no moment with a partition held by two members
    assert first.assignment() == set() and second.assignment() == set()
    revoked = next(p for kind, p in first_listener.calls if kind == "revoked")
    assert second_listener.calls[0] == ("assigned", revoked)
    assert len(got) == 40  # nothing read twice: the second member starts at the commit


async def test_revoked_partitions_are_committed_before_they_move(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 2)
    fill(cluster, "t", 0, 1, 4)
    fill(cluster, "t", 1, 1, 4)
    async with group_consumer(cluster, auto_commit_interval_ms=60_000) as first:
        first.subscribe(["t"])
        await poll_until(first, lambda rs: len(rs) >= 8)
        async with group_consumer(cluster) as second:
            second.subscribe(["t"])
            with trio.fail_after(DEADLINE_S):
                while len(second.assignment()) < 1:
                    await first.poll(timeout_ms=20)
                    await second.poll(timeout_ms=20)
            (moved,) = second.assignment()
            # committed by the first member on revoke
            assert cluster.coordinator.committed("g")[moved] == 4
            assert await second.position(moved) == 4


async def test_commit_and_committed(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 2)
    fill(cluster, "t", 0, 1, 5)
    async with group_consumer(cluster, enable_auto_commit=False) as consumer:
        consumer.subscribe(["t"])
        await poll_until(consumer, lambda rs: len(rs) >= 5)
        assert await consumer.committed([("t", 0), ("t", 1)]) == {
            TopicPartition("t", 0): None,
            TopicPartition("t", 1): None,
        }
        await consumer.commit()
        found = await consumer.committed([("t", 0)])
        assert found[TopicPartition("t", 0)] == OffsetAndMetadata(5, None, 0)
        await consumer.commit({("t", 1): OffsetAndMetadata(0, "note")})
        assert (await consumer.committed([("t", 1)]))[TopicPartition("t", 1)] == (0, "note", None)
        done = trio.Event()
        results: list[object] = []

        def callback(offsets: object, error: Exception | None) -> None:
            results.append(error)
            done.set()

        consumer.commit_async({("t", 0): 3}, callback)
        with trio.fail_after(DEADLINE_S):
            await done.wait()
        assert results == [None]
        assert cluster.coordinator.committed("g")[TopicPartition("t", 0)] == 3
        member_id = consumer.group_metadata().member_id  # type: ignore[union-attr]
        assert all(c[1] == member_id for c in cluster.coordinator.commits)
    assert cluster.coordinator.committed("g")[TopicPartition("t", 0)] == 3  # no auto


async def test_auto_commit_commits_what_poll_returned(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    fill(cluster, "t", 0, 1, 6)
    async with group_consumer(cluster, max_poll_records=4) as consumer:
        consumer.subscribe(["t"])
        await poll_until(consumer, lambda rs: len(rs) >= 4)
        with trio.fail_after(DEADLINE_S):
            while cluster.coordinator.committed("g").get(TopicPartition("t", 0)) != 4:
                assert await consumer.poll(timeout_ms=20, max_records=0) == []
    assert cluster.coordinator.committed("g")[TopicPartition("t", 0)] == 4


async def test_a_fenced_member_loses_its_partitions_and_rejoins(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    fill(cluster, "t", 0, 1, 3)
    listener = Recorder()
    async with group_consumer(cluster) as consumer:
        consumer.subscribe(["t"], listener=listener)
        await poll_until(consumer, lambda rs: len(rs) >= 3)
        first_id = consumer.group_metadata().member_id  # type: ignore[union-attr]
        cluster.coordinator.remove("g", first_id)  # its session timed out
        with trio.fail_after(DEADLINE_S):
            while len(listener.calls) < 3:
                await consumer.poll(timeout_ms=20)
        assert listener.calls == [
            ("assigned", tps(0)),
            ("lost", tps(0)),
            ("assigned", tps(0)),
        ]
        member = consumer.group_metadata()
        assert member is not None and member.member_id != first_id
        fenced_commits = [c for c in cluster.coordinator.commits if c[1] == first_id]
        assert all(not c[3] for c in fenced_commits)  # lost partitions are not committed


async def test_coordinator_lookups_are_retried(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1)
    fill(cluster3, "t", 0, 1, 3)
    cluster3.coordinator.coordinator_id = 2
    cluster3.fail_next(ApiKey.FIND_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, times=2)
    async with group_consumer(cluster3) as consumer:
        consumer.subscribe(["t"])
        await poll_until(consumer, lambda rs: len(rs) >= 3)
        finds = cluster3.count(FindCoordinatorRequest)
        assert finds >= 3
        cluster3.coordinator.coordinator_id = 3  # the coordinator moved
        with trio.fail_after(DEADLINE_S):
            while not any(
                broker == 3 and isinstance(body, ConsumerGroupHeartbeatRequest)
                for broker, body in cluster3.requests
            ):
                await consumer.poll(timeout_ms=20)
        assert cluster3.count(FindCoordinatorRequest) > finds
        assert consumer.assignment() == tps(0)  # kept while the coordinator moved


async def test_a_fatal_group_error_is_raised_by_poll(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    cluster.fail_next(ApiKey.CONSUMER_GROUP_HEARTBEAT, ErrorCode.UNSUPPORTED_ASSIGNOR)
    async with group_consumer(cluster, group_remote_assignor="nope") as consumer:
        consumer.subscribe(["t"])
        with trio.fail_after(DEADLINE_S), pytest.raises(HighwaterClientError) as caught:
            while True:
                await consumer.poll(timeout_ms=20)
    assert caught.value.code == ErrorCode.UNSUPPORTED_ASSIGNOR


async def test_no_poll_for_max_poll_interval_leaves_and_the_next_poll_rejoins(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 1)
    fill(cluster, "t", 0, 1, 3)
    listener = Recorder()
    async with group_consumer(cluster, max_poll_interval_ms=300) as consumer:
        consumer.subscribe(["t"], listener=listener)
        await poll_until(consumer, lambda rs: len(rs) >= 3)
        first_id = consumer.group_metadata().member_id  # type: ignore[union-attr]
        await until(lambda: first_id not in cluster.coordinator.member_ids("g"), "a leave")
        # The coordinator removes the member before the member has read the answer (till
        # then it is "leaving").
        await until(lambda: consumer.group_metadata().state == "stale", "the leave answered")  # type: ignore[union-attr]
        with trio.fail_after(DEADLINE_S):
            while len(listener.calls) < 3:
                await consumer.poll(timeout_ms=20)
        assert [kind for kind, _ in listener.calls] == ["assigned", "lost", "assigned"]


async def test_a_member_out_of_the_group_cannot_commit_until_it_rejoins(
    cluster: FakeCluster,
) -> None:
    """Gone for missing max.poll.interval.ms (or fenced), a member's commit would go out as an
    outsider's and pass once the group is empty: it is refused before it is sent."""
    cluster.create_topic("t", 1)
    fill(cluster, "t", 0, 1, 3)
    async with group_consumer(cluster, max_poll_interval_ms=300) as consumer:
        consumer.subscribe(["t"])
        await poll_until(consumer, lambda rs: len(rs) >= 3)
        await until(lambda: consumer.group_metadata().state == "stale", "the leave answered")  # type: ignore[union-attr]
        sent = len(cluster.coordinator.commits)
        with pytest.raises(CommitFailedError, match="no longer in group"):
            await consumer.commit({("t", 0): 3})
        assert len(cluster.coordinator.commits) == sent


async def test_a_static_member_leaves_with_epoch_minus_2(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    async with group_consumer(cluster, group_instance_id="i-1") as consumer:
        consumer.subscribe(["t"])
        with trio.fail_after(DEADLINE_S):
            while not consumer.assignment():
                await consumer.poll(timeout_ms=20)
    leaves = [
        body.member_epoch
        for _, body in cluster.requests
        if isinstance(body, ConsumerGroupHeartbeatRequest) and body.member_epoch < 0
    ]
    assert leaves == [-2]


async def test_a_listener_error_comes_out_of_poll_after_the_reconciliation(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 2)

    class Failing(RebalanceListener):
        async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            raise RuntimeError("listener bug")

    async with group_consumer(cluster) as consumer:
        consumer.subscribe(["t"], listener=Failing())
        with trio.fail_after(DEADLINE_S), pytest.raises(RuntimeError, match="listener bug"):
            while True:
                await consumer.poll(timeout_ms=20)
        assert consumer.assignment() == tps(0, 1)  # taken on all the same


async def test_a_pattern_subscription_is_the_coordinator_s_to_resolve(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("orders", 1)
    cluster.create_topic("other", 1)
    async with group_consumer(cluster) as consumer:
        consumer.subscribe(re.compile("ord.*"))
        with trio.fail_after(DEADLINE_S):
            while not consumer.assignment():
                await consumer.poll(timeout_ms=20)
        assert consumer.assignment() == {TopicPartition("orders", 0)}
    joins = [
        body
        for _, body in cluster.requests
        if isinstance(body, ConsumerGroupHeartbeatRequest) and body.member_epoch == 0
    ]
    assert joins[0].subscribed_topic_regex == "ord.*"


async def test_misuse_is_reported(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    consumer = group_consumer(cluster)
    consumer.subscribe(["t"])
    with pytest.raises(ClientClosedError, match="async with"):
        await consumer.poll(timeout_ms=10)
    with pytest.raises(HighwaterClientError, match="unsubscribe"):
        consumer.assign([("t", 0)])
    with pytest.raises(TypeError):
        consumer.subscribe("t")
    await consumer.aclose()
    async with Consumer(cluster.bootstrap) as plain:
        with pytest.raises(HighwaterClientError, match="group_id"):
            await plain.commit()
        with pytest.raises(HighwaterClientError, match="group_id"):
            plain.subscribe(re.compile("t"))


async def test_an_admin_style_commit_is_refused_while_the_group_has_members(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 1)
    async with group_consumer(cluster) as member, group_consumer(cluster) as outsider:
        member.subscribe(["t"])
        with trio.fail_after(DEADLINE_S):
            while not member.assignment():
                await member.poll(timeout_ms=20)
        outsider.assign([("t", 0)])
        with pytest.raises(CommitFailedError, match="active members"):
            await outsider.commit({("t", 0): 1}, timeout_ms=2_000)


async def test_a_refused_commit_is_explained_by_the_identity_it_was_sent_with() -> None:
    """A member fenced while its commit is on its way (its heartbeat hears of it first, and
    from then on it would commit as an outsider): the refusal is about the member that sent
    it, not about an outsider committing into an active group."""
    identities = iter([("m-1", 3), ADMIN_MEMBER])  # as sent; then fenced
    sent: list[OffsetCommitRequest] = []

    class Refusing:
        group_id = "g"
        retry_backoff_ms = 100

        async def call(self, make_request: Callable[[], object], *_: object) -> object:
            request = make_request()
            assert isinstance(request, OffsetCommitRequest)
            sent.append(request)
            refused = OffsetCommitPartitionResponse(0, ErrorCode.UNKNOWN_MEMBER_ID)
            return OffsetCommitResponse((OffsetCommitTopicResponse("t", (refused,)),))

    with pytest.raises(CommitFailedError, match="this member is no longer in the group"):
        await commit_offsets(
            cast(Coordinator, Refusing()),
            {TopicPartition("t", 0): OffsetAndMetadata(5)},
            lambda: next(identities),
            1_000,
        )
    assert [(r.member_id, r.member_epoch) for r in sent] == [("m-1", 3)]


async def test_commit_retries_a_stale_epoch_and_the_coordinator_s_errors(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 1)
    async with group_consumer(cluster, enable_auto_commit=False) as consumer:
        consumer.subscribe(["t"])
        with trio.fail_after(DEADLINE_S):
            while not consumer.assignment():
                await consumer.poll(timeout_ms=20)
        cluster.fail_next(ApiKey.OFFSET_COMMIT, ErrorCode.STALE_MEMBER_EPOCH)
        cluster.fail_next(ApiKey.OFFSET_COMMIT, ErrorCode.NOT_COORDINATOR)
        await consumer.commit({("t", 0): 0})
        assert cluster.coordinator.committed("g")[TopicPartition("t", 0)] == 0
        assert len(cluster.coordinator.commits) == 3
        cluster.fail_next(ApiKey.OFFSET_COMMIT, ErrorCode.COORDINATOR_NOT_AVAILABLE, times=1000)
        with pytest.raises(HighwaterClientError) as stuck:
            await consumer.commit({("t", 0): 0}, timeout_ms=500)
        assert stuck.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert "did not answer within 500 ms" in str(stuck.value)
        cluster.clear_injected()
