"""The producer's on_retry hook against the fake cluster: what it says while a partition has no
leader, after a leader's refusal or a dropped connection, and how often."""

from __future__ import annotations

import itertools

import pytest
import trio

from client.errors import HighwaterTimeoutError
from client.producer import Producer, RetryNotice
from client.producer import retry_notices as retry_notices_module
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.unit.client.fake_broker import FakeCluster


async def test_a_partition_without_leader_is_noticed_then_its_records_expire(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 2, leaders=[-1, 1])  # partition 0 has no leader
    notices: list[RetryNotice] = []
    async with Producer(
        cluster.bootstrap, delivery_timeout_ms=600, retry_backoff_ms=20, on_retry=notices.append
    ) as producer:
        await producer.partitions_for("t")
        futures = [producer.send_nowait("t", b"v", partition=i % 2) for i in range(5)]
        with trio.fail_after(10):
            await producer.flush()
    assert [f.exception() is None for f in futures] == [False, True, False, True, False]
    assert isinstance(futures[0].exception(), HighwaterTimeoutError)
    # One notice (600 ms is within RETRY_NOTICE_INTERVAL_MS), for partition 0 alone.
    (notice,) = notices
    assert (notice.topic, notice.partition, notice.error) == ("t", 0, "LEADER_NOT_AVAILABLE")
    assert notice.records_waiting == 3
    assert 0 <= notice.waiting_ms < 600


async def test_a_leaders_refusal_is_noticed_by_its_name_and_the_retry_delivers(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=3)
    notices: list[RetryNotice] = []
    async with Producer(cluster.bootstrap, retry_backoff_ms=10, on_retry=notices.append) as p:
        await p.partitions_for("t")
        futures = [p.send_nowait("t", b"%d" % i) for i in range(4)]
        await p.flush()
    assert [f.result().offset for f in futures] == [0, 1, 2, 3]
    assert [(n.topic, n.partition, n.error) for n in notices] == [
        ("t", 0, "NOT_LEADER_OR_FOLLOWER")
    ]
    assert notices[0].records_waiting == 4


async def test_a_dropped_connection_is_noticed_as_a_network_exception(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    cluster.drop_next(ApiKey.PRODUCE)
    notices: list[RetryNotice] = []
    async with Producer(cluster.bootstrap, retry_backoff_ms=10, on_retry=notices.append) as p:
        assert (await (await p.send("t", b"a"))).offset == 0
    assert [n.error for n in notices] == ["NETWORK_EXCEPTION"]


async def test_notices_of_a_partition_come_at_most_once_per_interval(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry_notices_module, "RETRY_NOTICE_INTERVAL_MS", 50)
    cluster.create_topic("t", 1, leaders=[-1])
    notices: list[RetryNotice] = []
    async with Producer(
        cluster.bootstrap, delivery_timeout_ms=500, retry_backoff_ms=5, on_retry=notices.append
    ) as producer:
        await producer.send("t", b"v")
        with trio.fail_after(10):
            await producer.flush()
    assert len(notices) >= 2
    gaps = [b.waiting_ms - a.waiting_ms for a, b in itertools.pairwise(notices)]
    assert all(gap >= 50 for gap in gaps), gaps
    assert {(n.error, n.records_waiting) for n in notices} == {("LEADER_NOT_AVAILABLE", 1)}


async def test_without_retries_there_is_no_notice(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 3)
    notices: list[RetryNotice] = []
    async with Producer(cluster.bootstrap, on_retry=notices.append) as producer:
        for i in range(300):
            await producer.send("t", b"%d" % i, key=b"%d" % i)
        await producer.flush()
    assert notices == []
