"""The cluster as the status page shows it (`GET /api/cluster`), assembled by the serving broker.

Consumer groups: each broker lists the groups it coordinates (ListGroups) and their committed
offsets (OffsetFetch); lag = HW - committed. The groups this broker coordinates also feed
`highwater_consumer_group_lag` on its /metrics (`group_lag`).

Topics, partitions, leaders, epochs, replicas and ISRs come from this broker's metadata cache
(what the controller last sent); the HW from each partition's leader (ListOffsets latest as a
consumer) and every replica's LEO from the broker hosting it (ListOffsets with the debug
replica id -2, as `highwater topics describe` does); this broker's own replicas are read
directly. Other brokers are asked on their inter-broker listener with this broker's
inter-broker security (its TLS files and SASL login), as its replica fetchers are. One
request of each kind per broker, concurrently, each bounded by `OFFSETS_TIMEOUT_S`; a broker
that does not answer shows as unreachable and its figures as null. A snapshot is reused for
`SNAPSHOT_MAX_AGE_S`, so many open pages cost what one does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import trio

from broker.core.metadata_cache import NO_LEADER, PartitionInfo
from broker.core.partition import DEBUG_REPLICA_ID
from broker.metrics import GroupLag
from broker.services import NotController
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import CONSUMER_REPLICA_ID
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["OFFSETS_TIMEOUT_S", "SNAPSHOT_MAX_AGE_S", "ClusterView"]

OFFSETS_TIMEOUT_S: Final = 1.5
SNAPSHOT_MAX_AGE_S: Final = 0.5

Offsets = dict[TopicPartition, int]
Committed = dict[str, dict[TopicPartition, int]]  # group -> partition -> committed offset


class ClusterView:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._connections: dict[int, BrokerConnection] = {}
        self._seen: set[int] = set()  # every broker id seen: a dead one still shows, as down
        self._lock = trio.Lock()
        self._snapshot: dict[str, Any] | None = None
        self._taken = 0.0
        self._hws: Offsets = {}  # every HW learned, for the groups' lag on /metrics
        self._hws_taken = 0.0

    async def snapshot(self) -> dict[str, Any]:
        async with self._lock:  # concurrent pages share one round of requests
            if self._snapshot is None or time.monotonic() - self._taken > SNAPSHOT_MAX_AGE_S:
                self._snapshot = await self._build()
                self._taken = time.monotonic()
            return self._snapshot

    async def _build(self) -> dict[str, Any]:
        ctx = self._ctx
        metadata = ctx.metadata
        live = dict(metadata.brokers)
        partitions = {
            TopicPartition(topic, index): info
            for topic, parts in metadata.topics.items()
            for index, info in parts.items()
        }
        self._seen |= set(live) | {r for info in partitions.values() for r in info.replicas}
        self._seen.add(ctx.broker_id)
        hws, leos, unanswered = await self._offsets(partitions, live)
        self._hws.update(hws)
        committed = await self._committed(live)
        controller = ctx.controller
        zk = ctx.zk
        brokers = []
        for broker_id in sorted(self._seen):
            endpoint = live.get(broker_id)
            if broker_id == ctx.broker_id:
                status = "up"
            elif endpoint is None:
                status = "down"
            else:
                status = "unreachable" if broker_id in unanswered else "up"
            brokers.append(
                {
                    "id": broker_id,
                    "host": endpoint.host if endpoint else None,
                    "port": endpoint.port if endpoint else None,
                    "status": status,
                    "controller": broker_id == metadata.controller_id,
                    # Only the serving broker knows its own session; a live broker's
                    # registration is an ephemeral znode, so it has one.
                    "zookeeper": (
                        ("none" if zk.absent else zk.session_state.value)
                        if broker_id == ctx.broker_id
                        else ("registered" if endpoint is not None else "no session")
                    ),
                    "leaders": sum(1 for i in partitions.values() if i.leader == broker_id),
                    "replicas": sum(1 for i in partitions.values() if broker_id in i.replicas),
                }
            )
        topics = []
        for topic in sorted(metadata.topics):
            rows = []
            for index in sorted(metadata.topics[topic]):
                tp = TopicPartition(topic, index)
                rows.append(_partition_row(tp, partitions[tp], live, hws, leos))
            topics.append(
                {
                    "name": topic,
                    "partitions": rows,
                    "high_watermark_sum": _sum(r["high_watermark"] for r in rows),
                    "log_end_offset_sum": _sum(
                        r["log_end_offsets"].get(str(r["leader"])) for r in rows
                    ),
                }
            )
        return {
            "cluster_id": ctx.cluster_id,
            "serving_broker": ctx.broker_id,
            "generated_ms": int(time.time() * 1000),
            "controller_id": metadata.controller_id,
            "controller_epoch": (
                metadata.controller_epoch
                if isinstance(controller, NotController)
                else controller.controller_epoch
            ),
            "brokers": brokers,
            "topics": topics,
            "groups": _groups(committed, hws),
        }

    # -- consumer groups ---------------------------------------------------------------------

    def _local_committed(self) -> Committed:
        """The committed offsets of the groups this broker coordinates."""
        coordinator = self._ctx.group_coordinator
        return {
            group: {tp: value.offset for tp, value in offsets.items()}
            for group, offsets in coordinator.core.committed_offsets.items()
            if offsets
        }

    async def _committed(self, live: dict[int, Any]) -> Committed:
        """Every group's committed offsets, cluster-wide: this broker's own, and from each
        other live broker ListGroups (the groups it coordinates), then OffsetFetch of each."""
        out = self._local_committed()

        async def ask(broker_id: int) -> None:
            listed = await self._ask(broker_id, live[broker_id], ListGroupsRequest())
            if not isinstance(listed, ListGroupsResponse):
                return
            for group in listed.groups:
                fetched = await self._ask(
                    broker_id, live[broker_id], OffsetFetchRequest(group.group_id)
                )
                if not isinstance(fetched, OffsetFetchResponse) or fetched.error_code:
                    continue
                offsets = {
                    TopicPartition(t.name, p.partition_index): p.committed_offset
                    for t in fetched.topics
                    for p in t.partitions
                    if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
                }
                if offsets:
                    out[group.group_id] = offsets

        async with trio.open_nursery() as nursery:
            for broker_id in live:
                if broker_id != self._ctx.broker_id:
                    nursery.start_soon(ask, broker_id)
        return out

    def group_lag(self) -> list[GroupLag]:
        """The lag of the groups this broker coordinates (BrokerCollector.group_lag): HW -
        committed offset, for the partitions whose HW is known here (call
        `refresh_group_high_watermarks` first to ask their leaders)."""
        local = {
            tp: p.high_watermark
            for tp, p in self._ctx.replica_manager.partitions.items()
            if p.is_leader
        }
        rows = []
        for group, offsets in sorted(self._local_committed().items()):
            for tp, offset in sorted(offsets.items()):
                hw = local.get(tp, self._hws.get(tp))
                if hw is not None:
                    rows.append(GroupLag(group, tp.topic, tp.partition, max(0, hw - offset)))
        return rows

    async def refresh_group_high_watermarks(self) -> None:
        """Ask the leaders of the partitions this broker's groups committed offsets for (and
        does not lead) for their HW; at most every SNAPSHOT_MAX_AGE_S, bounded."""
        if time.monotonic() - self._hws_taken <= SNAPSHOT_MAX_AGE_S:
            return
        wanted = {tp for offsets in self._local_committed().values() for tp in offsets}
        if not wanted:
            return
        metadata = self._ctx.metadata
        live = dict(metadata.brokers)
        led: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            info = metadata.partition(tp.topic, tp.partition)
            local = self._ctx.replica_manager.partitions.get(tp)
            if info is None or (local is not None and local.is_leader):
                continue
            if info.leader in live and info.leader != self._ctx.broker_id:
                led.setdefault(info.leader, []).append(tp)

        async def ask(broker_id: int, tps: list[TopicPartition]) -> None:
            found = await self._latest(broker_id, live[broker_id], tps, CONSUMER_REPLICA_ID)
            if found is not None:
                self._hws.update(found)

        async with trio.open_nursery() as nursery:
            for broker_id, tps in led.items():
                nursery.start_soon(ask, broker_id, tps)
        self._hws_taken = time.monotonic()

    # -- offsets ---------------------------------------------------------------------------

    async def _offsets(
        self, partitions: dict[TopicPartition, PartitionInfo], live: dict[int, Any]
    ) -> tuple[Offsets, dict[tuple[TopicPartition, int], int], set[int]]:
        """(HW by partition, LEO by (partition, replica), brokers asked that did not answer)."""
        me = self._ctx.broker_id
        hws: Offsets = {}
        leos: dict[tuple[TopicPartition, int], int] = {}
        for tp, p in self._ctx.replica_manager.partitions.items():
            leos[(tp, me)] = p.log_end_offset
            if p.is_leader:
                hws[tp] = p.high_watermark
        led: dict[int, list[TopicPartition]] = {}
        hosted: dict[int, list[TopicPartition]] = {}
        for tp, info in partitions.items():
            if info.leader in live and info.leader != me:
                led.setdefault(info.leader, []).append(tp)
            for replica in info.replicas:
                if replica in live and replica != me:
                    hosted.setdefault(replica, []).append(tp)
        unanswered: set[int] = set()

        async def ask(broker_id: int, tps: list[TopicPartition], replica_id: int) -> None:
            found = await self._latest(broker_id, live[broker_id], tps, replica_id)
            if found is None:
                unanswered.add(broker_id)
                return
            if replica_id == DEBUG_REPLICA_ID:
                leos.update(((tp, broker_id), offset) for tp, offset in found.items())
            else:
                hws.update(found)

        async with trio.open_nursery() as nursery:
            for broker_id, tps in led.items():
                nursery.start_soon(ask, broker_id, tps, CONSUMER_REPLICA_ID)
            for broker_id, tps in hosted.items():
                nursery.start_soon(ask, broker_id, tps, DEBUG_REPLICA_ID)
        for broker_id in list(self._connections):
            if broker_id not in live:
                self._connections.pop(broker_id).close_now()
        return hws, leos, unanswered

    async def _latest(
        self, broker_id: int, endpoint: Any, tps: list[TopicPartition], replica_id: int
    ) -> Offsets | None:
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for tp in sorted(tps):
            topics.setdefault(tp.topic, []).append(
                ListOffsetsPartition(tp.partition, LATEST_TIMESTAMP)
            )
        request = ListOffsetsRequest(
            replica_id, tuple(ListOffsetsTopic(t, tuple(ps)) for t, ps in topics.items())
        )
        response = await self._ask(broker_id, endpoint, request)
        if not isinstance(response, ListOffsetsResponse):
            return None
        return {
            TopicPartition(t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }

    async def _ask(self, broker_id: int, endpoint: Any, request: object) -> object | None:
        """One request to a broker on this view's connection to it, bounded by
        OFFSETS_TIMEOUT_S (None: no answer; the connection is dropped)."""
        response: object | None = None
        with trio.move_on_after(OFFSETS_TIMEOUT_S):
            try:
                conn = self._connections.get(broker_id)
                if conn is None or conn.broken:
                    conn = await connect(
                        endpoint.host,
                        endpoint.port,
                        client_id=f"status-page-{self._ctx.broker_id}",
                        timeout_ms=int(OFFSETS_TIMEOUT_S * 1000),
                        # The inter-broker listener's address, so its security (TLS, the
                        # broker's own SASL login), as replica fetchers connect.
                        security=self._ctx.inter_broker_security,
                    )
                    self._connections[broker_id] = conn
                response = await conn.request(request, timeout_ms=int(OFFSETS_TIMEOUT_S * 1000))
            except (BrokerConnectionError, HighwaterError):
                pass
        if response is None:
            stale = self._connections.pop(broker_id, None)
            if stale is not None:
                stale.close_now()
        return response

    async def aclose(self) -> None:
        for conn in self._connections.values():
            conn.close_now()
        self._connections.clear()


def _partition_row(
    tp: TopicPartition,
    info: PartitionInfo,
    live: dict[int, Any],
    hws: Offsets,
    leos: dict[tuple[TopicPartition, int], int],
) -> dict[str, Any]:
    offline_replicas = [r for r in info.replicas if r not in live or r in info.offline_replicas]
    return {
        "partition": tp.partition,
        "leader": info.leader,
        "leader_epoch": info.leader_epoch,
        "replicas": list(info.replicas),
        "isr": list(info.isr),
        "offline_replicas": offline_replicas,
        "high_watermark": hws.get(tp),
        "log_end_offsets": {str(r): leos.get((tp, r)) for r in info.replicas},
        "under_replicated": len(info.isr) < len(info.replicas),
        "offline": info.leader == NO_LEADER or info.leader not in live,
    }


def _groups(committed: Committed, hws: Offsets) -> list[dict[str, Any]]:
    """Each group's lag per partition (HW - committed; null where the HW is unknown) and in
    total, for the page's charts."""
    out = []
    for group in sorted(committed):
        rows = []
        total = 0
        for tp, offset in sorted(committed[group].items()):
            hw = hws.get(tp)
            lag = None if hw is None else max(0, hw - offset)
            total += lag or 0
            rows.append(
                {"topic": tp.topic, "partition": tp.partition, "committed": offset, "lag": lag}
            )
        out.append({"name": group, "lag": total, "partitions": rows})
    return out


def _sum(values: Iterable[int | None]) -> int | None:
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total
