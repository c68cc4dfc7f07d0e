"""The Spark source's task read loop against the fake cluster: leader changes (KIP-320).

A task that already read records validates them with OffsetForLeaderEpoch when the partition's
leader epoch changes; a new leader whose log no longer holds them (an unclean election) is
data loss, raised or logged per failOnDataLoss.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

pa = pytest.importorskip("pyarrow")

from client.spark.data_loss import DataLossError  # noqa: E402
from client.spark.offsets import OffsetRange, TopicPartition  # noqa: E402
from client.spark.partition_reader import ReadSettings, _fetch_loop  # noqa: E402
from protocol.messages.fetch import FetchRequest  # noqa: E402
from tests.unit.client.fake_broker import FakeCluster  # noqa: E402
from tests.unit.client.test_consumer import append, fill  # noqa: E402

TASK = OffsetRange(TopicPartition("t", 0), 0, 12)


def settings(cluster: FakeCluster, fail_on_data_loss: bool = True) -> ReadSettings:
    return ReadSettings(cluster.bootstrap, False, fail_on_data_loss, poll_timeout_ms=10_000)


async def fetched_at(cluster: FakeCluster, broker: int, offset: int) -> None:
    """Wait (bounded) until `broker` has been asked for `offset`: the task read all before.
    Generous: the read loop runs in a worker thread, slow to start on a loaded machine."""
    with trio.fail_after(60):
        while True:
            if any(
                b == broker and body.topics[0].partitions[0].fetch_offset == offset
                for b, body in cluster.requests
                if isinstance(body, FetchRequest)
            ):
                return
            await trio.sleep(0.01)


async def read_with_leader_change(
    cluster: FakeCluster, change: Any, fail_on_data_loss: bool = True
) -> list[tuple[int, bytes]]:
    """Read TASK; once offsets 0..9 are read, apply `change`. The (offset, value) rows."""
    cluster.create_topic("t", 1, leaders=[1], replication_factor=3)
    fill(cluster, "t", 0, batches=2, per_batch=5)  # offsets 0..9, leader epoch 0
    batches: list[Any] = []
    failed: list[DataLossError] = []

    async def read() -> None:
        try:
            await _fetch_loop(settings(cluster, fail_on_data_loss), TASK, batches.append)
        except DataLossError as exc:  # raised below, not wrapped in the nursery's group
            failed.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await fetched_at(cluster, 1, 10)
        change()
    if failed:
        raise failed[0]
    rows = pa.Table.from_batches(batches).select(["offset", "value"]).to_pylist()
    return [(r["offset"], r["value"]) for r in rows]


async def test_a_clean_leader_change_is_validated_then_followed(cluster3: FakeCluster) -> None:
    def change() -> None:
        cluster3.move_leader("t", 0, 2)  # epoch 1; the new leader has all 10 records
        append(cluster3, "t", 0, [b"a", b"b"])

    rows = await read_with_leader_change(cluster3, change)
    assert rows == [(i, b"%d" % i) for i in range(10)] + [(10, b"a"), (11, b"b")]
    assert cluster3.validations() == [(2, 0, 1)]  # the epoch of what was read, at epoch 1


async def test_a_truncated_log_after_a_leader_change_is_data_loss(cluster3: FakeCluster) -> None:
    def unclean_election() -> None:
        cluster3.truncate_to("t", 0, 5)  # the new leader only had offsets 0..4
        cluster3.move_leader("t", 0, 2)
        append(cluster3, "t", 0, [b"new-%d" % i for i in range(5, 12)])

    with pytest.raises(DataLossError, match="t-0: offsets 5 to 9, already read"):
        await read_with_leader_change(cluster3, unclean_election)
    assert cluster3.validations() == [(2, 0, 1)]
    fetched_from_new_leader = [
        body.topics[0].partitions[0].fetch_offset
        for b, body in cluster3.requests
        if isinstance(body, FetchRequest) and b == 2
    ]
    assert fetched_from_new_leader == []  # validated before anything was fetched from it


async def test_without_fail_on_data_loss_the_read_goes_on(cluster3: FakeCluster) -> None:
    def unclean_election() -> None:
        cluster3.truncate_to("t", 0, 5)
        cluster3.move_leader("t", 0, 2)
        append(cluster3, "t", 0, [b"new-%d" % i for i in range(5, 12)])

    rows = await read_with_leader_change(cluster3, unclean_election, fail_on_data_loss=False)
    # What was read stays read; the task goes on from where it was, in the new leader's log.
    assert rows == [(i, b"%d" % i) for i in range(10)] + [(10, b"new-10"), (11, b"new-11")]
