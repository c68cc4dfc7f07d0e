"""Closing the producer against the fake cluster: a close right after a burst of send_nowait,
and what close says of the records it could not wait for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
import trio.testing

from client.errors import ClientClosedError
from client.producer import DeliveryFuture, Producer
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
