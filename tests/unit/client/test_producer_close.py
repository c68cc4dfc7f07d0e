"""Closing the producer against the fake cluster: a close right after a burst of send_nowait,
and what close says of the records it could not wait for."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import trio
import trio.testing

from client.errors import ClientClosedError
from client.producer import CloseResult, DeliveryFuture, Producer, RetryNotice
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.produce import ProduceRequest
from protocol.records import read_header
from tests.unit.client.fake_broker import FakeCluster


class Boom(Exception):
    pass


def leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


async def test_a_body_raising_after_a_send_nowait_burst_gets_only_its_own_error(
    cluster: FakeCluster,
) -> None:
    """The exit closes at once (timeout 0): the sender, woken once more, must not try to
    encode the batches close emptied (it raised `ValueError: a batch holds at least one
    record` next to the body's error)."""
    cluster.create_topic("t")
    futures: list[DeliveryFuture] = []
    with pytest.raises(BaseException) as caught:  # a group: its leaves are checked
        async with Producer(cluster.bootstrap, acks=1, linger_ms=60_000, batch_size=200) as p:
            await p.partitions_for("t")
            futures += [p.send_nowait("t", b"x" * 50, partition=0) for _ in range(50)]
            raise Boom
    assert [type(e) for e in leaves(caught.value)] == [Boom]
    assert all(isinstance(f.exception(), ClientClosedError) for f in futures)


async def test_aclose_at_once_after_a_send_nowait_burst_raises_nothing(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, acks=1, linger_ms=60_000, batch_size=200) as p:
        await p.partitions_for("t")
        futures = [p.send_nowait("t", b"x" * 50, partition=0) for _ in range(50)]
        await p.aclose(timeout_ms=0)
        await trio.testing.wait_all_tasks_blocked()  # the sender ran after close
    assert all(isinstance(f.exception(), ClientClosedError) for f in futures)
    assert cluster.records("t", 0) == []


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10) -> None:
    """Until condition() holds; fails after timeout_s."""
    deadline = trio.current_time() + timeout_s
    while True:
        if condition():
            return
        assert trio.current_time() < deadline, "timed out"
        await trio.sleep(0.005)


async def test_close_tells_records_in_flight_from_records_never_sent(cluster: FakeCluster) -> None:
    """The leader never answers: the batch in flight is in doubt, the ones queued behind it
    (one in flight per partition) are aborted; each record's error says which."""
    cluster.create_topic("t")
    cluster.stalled.add((1, ApiKey.PRODUCE))
    async with Producer(
        cluster.bootstrap,
        acks=1,
        enable_idempotence=False,
        max_in_flight_requests_per_connection=1,
        linger_ms=0,
        batch_size=200,
    ) as producer:
        await producer.partitions_for("t")
        futures = [producer.send_nowait("t", b"x" * 50) for _ in range(10)]
        await wait_until(lambda: cluster.count(ProduceRequest) == 1)
        result = await producer.aclose(timeout_ms=100)
        assert await producer.aclose() == result  # closing again: the same answer
    (request,) = [body for _, body in cluster.requests if isinstance(body, ProduceRequest)]
    in_flight = read_header(request.topic_data[0].partition_data[0].records).record_count
    assert 0 < in_flight < 10
    assert result == CloseResult(aborted=10 - in_flight, in_doubt=in_flight)
    errors = [f.exception() for f in futures]
    assert all(isinstance(e, ClientClosedError) for e in errors)
    doubts = [e.in_doubt for e in errors if isinstance(e, ClientClosedError)]
    assert doubts == [True] * in_flight + [False] * (10 - in_flight)


@pytest.mark.parametrize(("fault", "in_doubt"), [("refused", False), ("connection dropped", True)])
async def test_a_batch_waiting_for_its_retry_is_in_doubt_only_after_an_unclear_attempt(
    cluster: FakeCluster, fault: str, in_doubt: bool
) -> None:
    """NOT_LEADER_OR_FOLLOWER says the batch was not appended: closing aborts it. A dropped
    connection says nothing: it may be in the log."""
    cluster.create_topic("t")
    if fault == "refused":
        cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    else:
        cluster.drop_next(ApiKey.PRODUCE)
    notices: list[RetryNotice] = []
    async with Producer(
        cluster.bootstrap, retry_backoff_ms=60_000, on_retry=notices.append
    ) as producer:
        future = await producer.send("t", b"a")
        await wait_until(lambda: bool(notices))  # the batch waits for its retry
        result = await producer.aclose(timeout_ms=0)
    assert result == CloseResult(aborted=int(not in_doubt), in_doubt=int(in_doubt))
    error = future.exception()
    assert isinstance(error, ClientClosedError)
    assert error.in_doubt is in_doubt
    assert ("may be in the topic" in str(error)) is in_doubt


async def test_a_close_with_everything_delivered_fails_nothing(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap) as producer:
        future = await producer.send("t", b"a")
        assert await producer.aclose() == CloseResult(aborted=0, in_doubt=0)
    assert future.result().offset == 0
