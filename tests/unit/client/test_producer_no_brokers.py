"""A producer whose bootstrap brokers do not answer: send fails once, after max_block_ms, with
NoBrokersAvailable; later sends fail at once, without queueing, until a broker answers."""

from __future__ import annotations

import socket

import pytest
import trio

from client.errors import NoBrokersAvailable, UnknownTopicError
from client.producer import Producer
from protocol.apis import ApiKey
from tests.unit.client.fake_broker import FakeCluster


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_no_broker_fails_the_first_send_after_max_block_and_the_next_ones_at_once(
    nursery: trio.Nursery,
) -> None:
    port = free_port()
    async with Producer(f"127.0.0.1:{port}", max_block_ms=300, retry_backoff_ms=20) as producer:
        started = trio.current_time()
        with trio.fail_after(10), pytest.raises(NoBrokersAvailable) as first:
            await producer.send("t", b"x")
        assert trio.current_time() - started >= 0.3  # it waited max_block_ms for a broker
        assert f"127.0.0.1:{port}" in str(first.value)
        assert "max_block_ms, 300 ms" in str(first.value)
        # The next 1,000 fail without waiting: inside a cancelled scope, any checkpoint would
        # raise Cancelled instead.
        refused = 0
        with trio.CancelScope() as scope:
            scope.cancel()
            for _ in range(1000):
                with pytest.raises(NoBrokersAvailable) as later:
                    await producer.send("t", b"x")
                refused += 1
            with pytest.raises(NoBrokersAvailable):
                await producer.partitions_for("other")
        assert not scope.cancelled_caught
        assert refused == 1000
        assert str(later.value) == str(first.value)

        # A broker comes up at the bootstrap address: sends work again once it answers.
        cluster = FakeCluster(1)
        await cluster.start(nursery, ports={1: port})
        cluster.create_topic("t")
        deadline = trio.current_time() + 10
        while True:
            try:
                future = await producer.send("t", b"back")
                break
            except NoBrokersAvailable:
                assert trio.current_time() < deadline, "the producer never found the broker"
                await trio.sleep(0.02)
        assert (await future).offset == 0


async def test_a_cluster_that_answers_without_the_topic_is_not_unreachable(
    cluster: FakeCluster,
) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION answers: each send waits max_block_ms for the topic (as
    Kafka's), never NoBrokersAvailable."""
    async with Producer(cluster.bootstrap, max_block_ms=200, retry_backoff_ms=20) as producer:
        for _ in range(2):
            started = trio.current_time()
            with trio.fail_after(10), pytest.raises(UnknownTopicError):
                await producer.send("nope", b"a")
            assert trio.current_time() - started >= 0.2
        cluster.create_topic("nope")
        assert (await (await producer.send("nope", b"a"))).offset == 0


async def test_brokers_that_accept_but_never_answer_count_as_none(cluster: FakeCluster) -> None:
    cluster.stalled.add((1, ApiKey.METADATA))
    async with Producer(cluster.bootstrap, max_block_ms=200, request_timeout_ms=60_000) as p:
        with trio.fail_after(30), pytest.raises(NoBrokersAvailable) as info:
            await p.send("t", b"x")
    assert str(info.value) == "no broker answered a metadata request (none in max_block_ms, 200 ms)"
