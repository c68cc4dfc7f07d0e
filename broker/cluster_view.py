"""The cluster as the status page shows it (`GET /api/cluster`), assembled by the serving broker.

Topics, partitions, leaders, epochs, replicas and ISRs come from this broker's metadata cache
(what the controller last sent); the HW from each partition's leader (ListOffsets latest as a
consumer) and every replica's LEO from the broker hosting it (ListOffsets with the debug
replica id -2, as `highwater topics describe` does); this broker's own replicas are read
directly. One request of each kind per broker, concurrently, each bounded by
`OFFSETS_TIMEOUT_S`; a broker that does not answer shows as unreachable and its figures as
null. A snapshot is reused for `SNAPSHOT_MAX_AGE_S`, so many open pages cost what one does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import trio

from broker.core.metadata_cache import NO_LEADER, PartitionInfo
from broker.core.partition import DEBUG_REPLICA_ID
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import CONSUMER_REPLICA_ID
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.metrics import BrokerCollector

__all__ = ["OFFSETS_TIMEOUT_S", "SNAPSHOT_MAX_AGE_S", "ClusterView"]

OFFSETS_TIMEOUT_S: Final = 1.5
SNAPSHOT_MAX_AGE_S: Final = 0.5

Offsets = dict[TopicPartition, int]


class ClusterView:
    def __init__(self, ctx: BrokerContext, collector: BrokerCollector | None = None) -> None:
        self._ctx = ctx
        self._collector = collector
        self._connections: dict[int, BrokerConnection] = {}
        self._seen: set[int] = set()  # every broker id seen: a dead one still shows, as down
        self._lock = trio.Lock()
        self._snapshot: dict[str, Any] | None = None
        self._taken = 0.0

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
                        (zk.session_state.value if zk is not None else "none")
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
                controller.controller_epoch if controller is not None else metadata.controller_epoch
            ),
            "brokers": brokers,
            "topics": topics,
            "groups": self._groups(),
        }

    def _groups(self) -> list[dict[str, Any]]:
        """Consumer-group lag, through the metrics' hook (empty until groups exist)."""
        source = self._collector.group_lag if self._collector is not None else None
        if source is None:
            return []
        groups: dict[str, dict[str, Any]] = {}
        for row in source():
            group = groups.setdefault(row.group, {"name": row.group, "lag": 0, "partitions": []})
            group["lag"] += row.lag
            group["partitions"].append(
                {"topic": row.topic, "partition": row.partition, "lag": row.lag}
            )
        return [groups[name] for name in sorted(groups)]

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
        response: ListOffsetsResponse | None = None
        with trio.move_on_after(OFFSETS_TIMEOUT_S):
            try:
                conn = self._connections.get(broker_id)
                if conn is None or conn.broken:
                    conn = await connect(
                        endpoint.host,
                        endpoint.port,
                        client_id=f"status-page-{self._ctx.broker_id}",
                        timeout_ms=int(OFFSETS_TIMEOUT_S * 1000),
                    )
                    self._connections[broker_id] = conn
                response = await conn.request(request, timeout_ms=int(OFFSETS_TIMEOUT_S * 1000))
            except (BrokerConnectionError, HighwaterError):
                pass
        if response is None:
            stale = self._connections.pop(broker_id, None)
            if stale is not None:
                stale.close_now()
            return None
        return {
            TopicPartition(t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }

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


def _sum(values: Iterable[int | None]) -> int | None:
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total
