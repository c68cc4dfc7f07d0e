"""The blocking facades, called from worker threads while the fake cluster runs in trio."""

from __future__ import annotations

import threading
from functools import partial

import trio

from client.blocking import BlockingAdmin, BlockingConsumer, BlockingProducer
from protocol.topic_partition import TopicPartition
from tests.unit.client.fake_broker import FakeCluster
from tests.unit.client.test_consumer import append


def roundtrip(bootstrap: str) -> list[bytes | None]:
    with BlockingAdmin(bootstrap) as admin:
        admin.create_topic("t", 2, 1)
        assert admin.list_topics() == ["t"]
    with BlockingProducer(bootstrap, linger_ms=1) as producer:
        futures = [producer.send("t", b"v%d" % i, key=b"k", partition=0) for i in range(10)]
        producer.flush()
        assert [f.result(timeout=5).offset for f in futures] == list(range(10))
    with BlockingConsumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        values: list[bytes | None] = []
        while len(values) < 10:
            values.extend(r.value for r in consumer.poll(timeout_ms=500))
        assert consumer.position(("t", 0)) == 10
        assert consumer.end_offsets([("t", 0)]) == {("t", 0): 10}
    return values


async def test_blocking_roundtrip(cluster: FakeCluster) -> None:
    before = threading.active_count()
    with trio.fail_after(30):
        values = await trio.to_thread.run_sync(partial(roundtrip, cluster.bootstrap))
    assert values == [b"v%d" % i for i in range(10)]
    assert threading.active_count() <= before + 1  # close() stopped every loop thread


def describe_twice(bootstrap: str) -> tuple[int, int]:
    # Two independent facades at once: no shared global state.
    with BlockingAdmin(bootstrap) as a, BlockingAdmin(bootstrap) as b:
        return a.describe_cluster().controller_epoch, b.describe_cluster().controller_epoch


async def test_independent_instances(cluster: FakeCluster) -> None:
    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(partial(describe_twice, cluster.bootstrap)) == (1, 1)


def send_to_closed(bootstrap: str) -> str:
    producer = BlockingProducer(bootstrap)
    producer.close()
    producer.close()  # idempotent
    try:
        producer.send("t", b"x")
    except Exception as exc:
        return type(exc).__name__
    return "no error"


async def test_closed_producer_refuses(cluster: FakeCluster) -> None:
    with trio.fail_after(30):
        name = await trio.to_thread.run_sync(partial(send_to_closed, cluster.bootstrap))
    assert name == "ClientClosedError"


def group_roundtrip(bootstrap: str) -> list[tuple[str, object]]:
    """A blocking group member: a plain listener that commits from inside the revoke call."""
    calls: list[tuple[str, object]] = []

    class Listener:
        def on_partitions_assigned(self, partitions: set[object]) -> None:
            calls.append(("assigned", sorted(partitions)))  # type: ignore[type-var]

        def on_partitions_revoked(self, partitions: set[object]) -> None:
            consumer.commit({("t", 0): 2})  # the blocking facade, called back from the listener
            calls.append(("revoked", sorted(partitions)))  # type: ignore[type-var]

    with BlockingConsumer(
        bootstrap, group_id="bg", auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        consumer.subscribe(["t"], listener=Listener())
        records: list[object] = []
        while len(records) < 3:
            records.extend(consumer.poll(timeout_ms=200))
        consumer.commit()
        committed = consumer.committed([("t", 0)])[TopicPartition("t", 0)]
        calls.append(("committed", committed and committed.offset))
        member = consumer.group_metadata()
        assert member is not None and member.state == "stable"
    calls.append(("closed", None))
    with BlockingAdmin(bootstrap) as admin:
        (offset,) = admin.list_group_offsets("bg")
        calls.append(("admin", (offset.committed_offset, offset.lag)))
        assert admin.delete_groups(["bg"]) == {"bg": 0}
    return calls


async def test_blocking_group_member(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    append(cluster, "t", 0, [b"a", b"b", b"c"])
    with trio.fail_after(30):
        calls = await trio.to_thread.run_sync(partial(group_roundtrip, cluster.bootstrap))
    assert calls[0][0] == "assigned" and calls[1] == ("committed", 3)
    assert calls[2][0] == "revoked" and calls[3] == ("closed", None)
    assert calls[4] == ("admin", (2, 1))
    assert not cluster.coordinator.exists("bg")
