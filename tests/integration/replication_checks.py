"""Waits and checks for replication scenario tests against real brokers and a real ZooKeeper.

Where the truth lives: a partition's leader, leader epoch and ISR in its ZooKeeper state znode
(the controller and the leader write it); what clients are told in each broker's metadata; what
each replica holds in its own files (batch headers with their CRCs, the leader-epoch-checkpoint)
and in its answers (ListOffsets with the debug replica id gives any replica's log end offset,
a consumer's ListOffsets the leader's high watermark). Waits poll with a deadline.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from client.consumer import Consumer
from client.errors import HighwaterClientError
from client.network import BrokerConnectionError, connect
from client.producer import Producer
from controller import zk_data
from controller.zk_client import ZkClient
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataPartition
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopic,
)
from protocol.records import BatchHeader
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, fetch_metadata

__all__ = [
    "DEBUG_REPLICA_ID",
    "BatchId",
    "PartitionState",
    "ZkView",
    "assert_agree_below_high_watermark",
    "assert_epochs_increase",
    "batch_ids",
    "create_topic",
    "high_watermark",
    "log_end_offset",
    "logged_events",
    "offset_for_leader_epoch",
    "partition_metadata",
    "prepare_cluster",
    "produce",
    "produce_fails",
    "read_committed",
    "truncations_logged",
    "wait_converged",
    "wait_isr",
    "wait_led",
    "wait_state",
    "wait_whole",
    "zk_view",
]

DEBUG_REPLICA_ID = -2  # ListOffsets "latest" from this id is the replica's log end offset
CONSUMER_REPLICA_ID = -1
ZK_SESSION_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition state znode as read: the znode and its version (the partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class BatchId:
    """What identifies a batch across replicas: offsets, the leader epoch it was written in,
    and its CRC (which covers the records, so equal CRCs mean equal contents)."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


class ZkView:
    """Read-only access to a cluster's ZooKeeper chroot."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        found = await self.zk.get(zk_data.partition_state_path(topic, partition))
        if found is None:
            return None
        data, stat = found
        znode = PartitionStateZnode.decode(data)
        return PartitionState(
            znode.leader, znode.leader_epoch, tuple(znode.isr), znode.controller_epoch, stat.version
        )

    async def controller(self) -> tuple[int, int] | None:
        """(controller id, controller epoch), None while no controller is registered."""
        found = await self.zk.get(zk_data.CONTROLLER_PATH)
        epoch = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        if found is None or epoch is None:
            return None
        return zk_data.ControllerZnode.decode(found[0]).broker_id, zk_data.decode_controller_epoch(
            epoch[0]
        )

    async def broker_registration(self, broker_id: int) -> tuple[int, int] | None:
        """(broker epoch = the registration's czxid, owning session id), None if absent."""
        found = await self.zk.get(zk_data.broker_path(broker_id))
        if found is None:
            return None
        return found[1].czxid, found[1].ephemeral_owner


@asynccontextmanager
async def zk_view(cluster: Cluster) -> AsyncIterator[ZkView]:
    zk = await ZkClient.connect(cluster.zookeeper_connect, ZK_SESSION_TIMEOUT_MS)
    try:
        yield ZkView(zk)
    finally:
        await zk.close()


# -- cluster shape -------------------------------------------------------------------------


async def wait_whole(cluster: Cluster, timeout_s: float = 60) -> None:
    """Every running broker answers and knows all running brokers and a live controller."""
    running = {b.broker_id for b in cluster.running_brokers()}

    async def whole() -> bool:
        for broker in cluster.running_brokers():
            meta = await fetch_metadata(broker.port, host=broker.host)
            if meta is None or {b.node_id for b in meta.brokers} != running:
                return False
            if meta.controller_id not in running:
                return False
        return True

    await eventually(whole, timeout_s, f"brokers {sorted(running)} registered with a controller")


async def _not_whole(cluster: Cluster) -> list[BrokerProcess]:
    """Running brokers whose metadata lacks a running broker or a live controller."""
    running = {b.broker_id for b in cluster.running_brokers()}
    lacking = []
    for broker in cluster.running_brokers():
        meta = await fetch_metadata(broker.port, host=broker.host)
        if (
            meta is None
            or {b.node_id for b in meta.brokers} != running
            or meta.controller_id not in running
        ):
            lacking.append(broker)
    return lacking


def prepare_cluster(cluster: Cluster, timeout_s: float = 30) -> None:
    """Before a test: every broker running (a test that failed midway may leave one down or
    paused) and the cluster whole."""
    cluster.ensure_running()
    trio.run(wait_whole, cluster, timeout_s)


async def create_topic(
    cluster: Cluster,
    name: str,
    replicas: Sequence[Sequence[int]],
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30,
) -> None:
    """Create `name` with partition i on `replicas[i]` (the head is the preferred leader), then
    wait until every running broker's metadata shows a leader for every partition."""
    topic = CreatableTopic(
        name,
        -1,
        -1,
        assignments=tuple(CreatableReplicaAssignment(i, tuple(r)) for i, r in enumerate(replicas)),
        configs=tuple(CreatableTopicConfig(k, v) for k, v in sorted((config or {}).items())),
    )
    broker = cluster.running_brokers()[0]
    conn = await connect(broker.host, broker.port)
    try:
        response: CreateTopicsResponse = await conn.request(
            CreateTopicsRequest((topic,), int(timeout_s * 1000)), timeout_ms=int(timeout_s * 2000)
        )
    finally:
        await conn.aclose()
    (result,) = response.topics
    assert result.error_code == ErrorCode.NONE, (result.error_code, result.error_message)

    async def led_everywhere() -> bool:
        for b in cluster.running_brokers():
            for p in range(len(replicas)):
                found = await partition_metadata(b, name, p)
                if found is None or found.leader_id < 0:
                    return False
        return True

    await eventually(led_everywhere, timeout_s, f"topic {name} led in every broker's metadata")


async def partition_metadata(
    broker: BrokerProcess, topic: str, partition: int
) -> MetadataPartition | None:
    meta = await fetch_metadata(broker.port, host=broker.host)
    if meta is None:
        return None
    for t in meta.topics:
        if t.name == topic:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p
    return None


async def wait_state(
    zk: ZkView,
    topic: str,
    partition: int,
    predicate: Callable[[PartitionState], bool],
    timeout_s: float,
    what: str,
) -> PartitionState:
    async def matches() -> PartitionState | None:
        state = await zk.partition_state(topic, partition)
        return state if state is not None and predicate(state) else None

    return await eventually(matches, timeout_s, f"{topic}-{partition}: {what}")


async def wait_isr(
    cluster: Cluster,
    zk: ZkView,
    topic: str,
    partition: int,
    isr: Iterable[int],
    timeout_s: float = 30,
    leader: int | None = None,
) -> PartitionState:
    """Wait until the state znode's ISR is exactly `isr` (and the leader `leader`, if given)
    and every running broker's metadata says the same: clients are routed to that leader."""
    wanted = tuple(sorted(isr))

    async def agreed() -> PartitionState | None:
        state = await zk.partition_state(topic, partition)
        if state is None or tuple(sorted(state.isr)) != wanted:
            return None
        if state.leader not in wanted or (leader is not None and state.leader != leader):
            return None
        for broker in cluster.running_brokers():
            meta = await partition_metadata(broker, topic, partition)
            if (
                meta is None
                or meta.leader_id != state.leader
                or meta.leader_epoch != state.leader_epoch
                or tuple(sorted(meta.isr_nodes)) != wanted
            ):
                return None
        return state

    return await eventually(agreed, timeout_s, f"{topic}-{partition}: ISR {list(wanted)}")


async def wait_led(
    cluster: Cluster, zk: ZkView, topic: str, partition: int, leader: int, timeout_s: float = 30
) -> PartitionState:
    """Wait until `leader` leads the partition in ZooKeeper, in every running broker's
    metadata, and in fact (it answers a consumer's ListOffsets)."""

    async def led() -> PartitionState | None:
        state = await zk.partition_state(topic, partition)
        if state is None or state.leader != leader:
            return None
        for broker in cluster.running_brokers():
            meta = await partition_metadata(broker, topic, partition)
            if meta is None or (meta.leader_id, meta.leader_epoch) != (
                state.leader,
                state.leader_epoch,
            ):
                return None
        if await high_watermark(cluster.brokers[leader], topic, partition) is None:
            return None
        return state

    return await eventually(led, timeout_s, f"{topic}-{partition}: led by broker {leader}")


# -- offsets, asked of one broker ---------------------------------------------------------


async def _list_latest(
    broker: BrokerProcess, topic: str, partition: int, replica_id: int
) -> int | None:
    request = ListOffsetsRequest(
        replica_id,
        (ListOffsetsTopic(topic, (ListOffsetsPartition(partition, LATEST_TIMESTAMP),)),),
    )
    try:
        conn = await connect(broker.host, broker.port, timeout_ms=2000)
    except BrokerConnectionError:
        return None
    try:
        response: ListOffsetsResponse = await conn.request(request, timeout_ms=2000)
    except BrokerConnectionError:
        return None
    finally:
        await conn.aclose()
    (answer,) = response.topics[0].partitions
    return answer.offset if answer.error_code == ErrorCode.NONE else None


async def log_end_offset(broker: BrokerProcess, topic: str, partition: int) -> int | None:
    """The replica's LEO as its own broker says (None: down, or it does not host it)."""
    return await _list_latest(broker, topic, partition, DEBUG_REPLICA_ID)


async def high_watermark(broker: BrokerProcess, topic: str, partition: int) -> int | None:
    """What a consumer may read up to, asked of `broker` (None unless it leads)."""
    return await _list_latest(broker, topic, partition, CONSUMER_REPLICA_ID)


async def offset_for_leader_epoch(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    leader_epoch: int,
    current_leader_epoch: int = -1,
) -> OffsetForLeaderEpochPartitionResult:
    request = OffsetForLeaderEpochRequest(
        (
            OffsetForLeaderEpochTopic(
                topic,
                (OffsetForLeaderEpochPartition(partition, leader_epoch, current_leader_epoch),),
            ),
        )
    )
    conn = await connect(broker.host, broker.port, timeout_ms=5000)
    try:
        response: OffsetForLeaderEpochResponse = await conn.request(request, timeout_ms=5000)
    finally:
        await conn.aclose()
    (answer,) = response.topics[0].partitions
    return answer


# -- clients -------------------------------------------------------------------------------


async def produce(
    cluster: Cluster,
    topic: str,
    partition: int,
    values: Iterable[bytes],
    *,
    acks: int | str = "all",
    delivery_timeout_ms: int = 30_000,
) -> list[int]:
    """Send each value alone and wait for its acknowledgement before the next (one batch per
    record, as the scenarios' "produce one by one"); returns the acked offsets. Raises the
    first failure."""
    offsets: list[int] = []
    failure: HighwaterClientError | None = None
    async with Producer(
        cluster.live_bootstrap,
        acks=acks,
        linger_ms=0,
        max_in_flight_requests_per_connection=1,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=min(delivery_timeout_ms, 10_000),
        retry_backoff_ms=50,
    ) as producer:
        for value in values:
            future = await producer.send(topic, value, partition=partition)
            try:
                offsets.append((await future).offset)
            except HighwaterClientError as exc:
                failure = exc  # raised here it would leave the producer inside a group
                break
    if failure is not None:
        raise failure
    return offsets


async def produce_fails(
    cluster: Cluster,
    topic: str,
    partition: int,
    value: bytes,
    *,
    delivery_timeout_ms: int,
) -> HighwaterClientError:
    """Send one acks=all record that must not be acknowledged; returns the error."""
    try:
        await produce(cluster, topic, partition, [value], delivery_timeout_ms=delivery_timeout_ms)
    except HighwaterClientError as exc:
        return exc
    raise AssertionError(f"{value!r} was acknowledged on {topic}-{partition}")


async def read_committed(
    cluster: Cluster, topic: str, partition: int, timeout_s: float = 30
) -> list[bytes | None]:
    """Every record a consumer can read from the start up to the high watermark now."""
    async with Consumer(
        cluster.live_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100
    ) as consumer:
        tp = (topic, partition)
        consumer.assign([tp])
        with trio.fail_after(timeout_s):
            end = (await consumer.end_offsets([tp]))[tp]  # type: ignore[index]
            got: list[bytes | None] = []
            offsets: list[int] = []
            while await consumer.position(tp) < end:
                for record in await consumer.poll(timeout_ms=500):
                    offsets.append(record.offset)
                    got.append(record.value)
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    assert not offsets or offsets[-1] < end, "nothing at or above the high watermark"
    return got


# -- what replicas hold --------------------------------------------------------------------


def batch_ids(headers: Iterable[BatchHeader]) -> list[BatchId]:
    return [BatchId(h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc) for h in headers]


async def assert_agree_below_high_watermark(
    cluster: Cluster, zk: ZkView, topic: str, partition: int
) -> int:
    """Replicas never diverge: below the leader's HW every ISR member holds exactly the
    leader's batches. (A replica out of the ISR may still hold an orphan tail below it until
    it comes back and truncates; wait_converged checks it then.) Returns the HW."""
    state = await zk.partition_state(topic, partition)
    assert state is not None and state.leader >= 0, f"{topic}-{partition} has a leader"
    leader = cluster.brokers[state.leader]
    hw = await high_watermark(leader, topic, partition)
    assert hw is not None, f"broker {leader.broker_id} answers for {topic}-{partition}"
    # HW first, files after: files only grow meanwhile, so everything below hw is there.
    expected = [b for b in batch_ids(leader.batch_headers(topic, partition)) if b.last_offset < hw]
    assert (expected[-1].last_offset + 1 if expected else 0) == hw
    for replica in state.isr:
        held = [
            b
            for b in batch_ids(cluster.brokers[replica].batch_headers(topic, partition))
            if b.last_offset < hw
        ]
        assert held == expected, f"ISR member {replica} differs below HW {hw}"
    return hw


async def wait_converged(
    brokers: Sequence[BrokerProcess],
    topic: str,
    partition: int,
    log_end: int,
    timeout_s: float = 30,
) -> list[BatchId]:
    """Wait until every replica's LEO is `log_end` and their files hold identical batches
    (offsets, epochs, CRCs) covering [0, log_end); returns those batches."""

    async def converged() -> list[BatchId] | None:
        for b in brokers:
            if await log_end_offset(b, topic, partition) != log_end:
                return None
        per_broker = [batch_ids(b.batch_headers(topic, partition)) for b in brokers]
        first = per_broker[0]
        if any(other != first for other in per_broker[1:]):
            return None
        if (first[-1].last_offset + 1 if first else 0) != log_end:
            return None
        return first

    try:
        return await eventually(converged, timeout_s, f"{topic}-{partition} replicas to converge")
    except AssertionError:
        detail = {b.broker_id: batch_ids(b.batch_headers(topic, partition)) for b in brokers}
        raise AssertionError(
            f"replicas of {topic}-{partition} did not converge: {detail}"
        ) from None


def assert_epochs_increase(ids: Sequence[BatchId]) -> None:
    """Offsets are contiguous and leader epochs never go down along the log."""
    expected = 0
    for bid in ids:
        assert bid.base_offset == expected, f"gap or overlap at {bid}"
        expected = bid.last_offset + 1
    epochs = [bid.leader_epoch for bid in ids]
    assert epochs == sorted(epochs), f"leader epochs go down along the log: {epochs}"


def logged_events(
    broker: BrokerProcess, event: str, *, since: int = 0, **fields: object
) -> list[dict[str, Any]]:
    """The broker's JSON log events named `event` whose fields include `fields`, from
    character `since` of its log file on (every run of the broker appends to the same file)."""
    found = []
    for line in broker.log_text()[since:].splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == event and all(entry.get(k) == v for k, v in fields.items()):
            found.append(entry)
    return found


def truncations_logged(broker: BrokerProcess, topic: str, partition: int) -> list[int]:
    """The offsets this broker truncated the partition's log to, over its whole history
    (a truncation that removed nothing is not logged)."""
    return [
        int(e["offset"])
        for e in logged_events(broker, "truncated", topic=topic, partition=partition)
    ]


# -- module fixtures ---------------------------------------------------------------------------

FAST_REPLICATION = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "isr.change.propagation.interval.ms": "200",
    "isr.change.propagation.blackout.ms": "300",
    "controlled.shutdown.retry.backoff.ms": "200",
    # Leadership moves only when a test moves it (the automatic rebalance has its own tests).
    "auto.leader.rebalance.enable": "false",
}
"""Broker settings that make replication's timers fast enough for tests."""


@contextmanager
def running_cluster(
    zookeeper_port: int,
    directory: Path,
    overrides: Mapping[str, str],
    broker_overrides: dict[int, dict[str, str]] | None = None,
) -> Iterator[Cluster]:
    """A whole 3-broker cluster for a test module; on an error it prints the brokers' logs.
    `broker_overrides[id]` apply to one broker, on top of `overrides`."""
    cluster = Cluster(
        zookeeper_port, directory, 3, dict(overrides), broker_overrides=broker_overrides
    )
    cluster.start()
    try:
        prepare_cluster(cluster, timeout_s=60)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def whole_cluster_around(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    """For an autouse fixture: every test starts with all brokers up; a failed test prints
    what the brokers logged while it ran."""
    prepare_cluster(cluster)
    marks = cluster.log_marks()
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        print(cluster.logs(tail_chars=20_000, since=marks))
