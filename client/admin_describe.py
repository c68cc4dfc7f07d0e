"""The admin client's topic descriptions (Kafka's Admin describeTopics, with offsets), mixed
into client.admin.Admin: each partition's leader, epoch, replicas, ISR, offline replicas, high
watermark and every replica's log end offset.

The offsets come from ListOffsets "latest": as a consumer from each leader (the HW) and with
the debug replica id -2 from each live replica's broker (its LEO), one request per broker and
kind, concurrently, each bounded by offsets_timeout_ms; a missing answer is None. A broker still
silent DESCRIBE_STRAGGLER_MS after the last answer came is not waited for: a hung broker (stopped,
not dead) would otherwise cost the whole offsets_timeout_ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import trio

from client.errors import NoBrokersAvailable, UnknownTopicError, error_for_code
from client.metadata import ClusterMetadata, PartitionInfo
from client.network import BrokerConnectionError
from protocol.errors import ErrorCode
from protocol.messages.fetch import CONSUMER_REPLICA_ID
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = [
    "DEBUG_REPLICA_ID",
    "DESCRIBE_OFFSETS_TIMEOUT_MS",
    "DESCRIBE_STRAGGLER_MS",
    "PartitionDescription",
    "TopicDescribeAdmin",
    "TopicDescription",
]

# ListOffsets from this replica id answers "latest" with the log end offset (Kafka's debugging
# consumer id), from any broker hosting the partition, leader or follower.
DEBUG_REPLICA_ID: Final = -2
# How long describe_topics waits for one broker's offsets before showing them as unknown.
DESCRIBE_OFFSETS_TIMEOUT_MS: Final = 5_000
# ... and at most this long after the last answer from another broker: the others answer within
# milliseconds of each other, a hung one never.
DESCRIBE_STRAGGLER_MS: Final = 1_000

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    high_watermark: int | None  # what consumers can read up to, from the leader
    log_end_offset: int | None  # the leader's
    # Every replica's log end offset, in replica order (None: its broker did not say).
    replica_log_end_offsets: Mapping[int, int | None]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]
    topic_id: str = ""  # KIP-516's, as kafka-topics prints it; "" from a broker without ids


class TopicDescribeAdmin:
    """The topic-description half of Admin (which provides `metadata`)."""

    metadata: ClusterMetadata

    async def describe_topics(
        self,
        names: Iterable[str] | None = None,
        *,
        offsets_timeout_ms: int = DESCRIBE_OFFSETS_TIMEOUT_MS,
    ) -> list[TopicDescription]:
        """Topics (all when names is None) with per-partition leader, epoch, replicas, ISR,
        offline replicas, high watermark and each replica's log end offset.
        UnknownTopicError if a named topic does not exist."""
        wanted = None if names is None else list(names)
        if wanted is None:
            await self.metadata.refresh(all_topics=True)
            wanted = list(self.metadata.topics)
        else:
            await self.metadata.refresh(wanted)
            for name in wanted:
                if self.metadata.partitions_for(name) is None:
                    code = self.metadata.topic_error(name)
                    if code and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise error_for_code(code, f"describe topic {name!r}")
                    raise UnknownTopicError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name!r}")
        infos = {
            name: [
                info
                for p in self.metadata.partitions_for(name) or ()
                if (info := self.metadata.partition_info(name, p)) is not None
            ]
            for name in wanted
        }
        hws, leos = await self._log_offsets(
            [info for parts in infos.values() for info in parts], offsets_timeout_ms
        )
        topic_ids = await self._topic_ids(wanted)
        return [
            TopicDescription(
                name,
                tuple(_describe_partition(info, hws, leos) for info in parts),
                topic_ids.get(name, ""),
            )
            for name, parts in infos.items()
        ]

    async def _topic_ids(self, names: Sequence[str]) -> dict[str, str]:
        """Each topic's id (KIP-516) from a Metadata v2 answer (the client's metadata view asks
        v1); none from a broker that predates ids, which refuses v2 by closing the connection."""
        try:
            answer: MetadataResponse = await self.metadata.ask_any(MetadataRequest(tuple(names)))
        except (BrokerConnectionError, NoBrokersAvailable):
            return {}
        return {t.name: t.topic_id for t in answer.topics if t.topic_id}

    async def _log_offsets(
        self, infos: Sequence[PartitionInfo], timeout_ms: int
    ) -> tuple[dict[TopicPartitionKey, int], dict[tuple[TopicPartitionKey, int], int]]:
        """(high watermark by partition, log end offset by (partition, replica)): ListOffsets
        latest to each leader as a consumer and to each live replica's broker with the debug
        id, concurrently; what does not come back within timeout_ms, or within
        DESCRIBE_STRAGGLER_MS of the last answer, is left out (and its broker asked last by
        the metadata's next questions)."""
        leaders: dict[int, list[PartitionInfo]] = {}
        hosts: dict[int, list[PartitionInfo]] = {}
        for info in infos:
            if info.leader in self.metadata.brokers:
                leaders.setdefault(info.leader, []).append(info)
            for replica in info.replicas:
                if replica in self.metadata.brokers and replica not in info.offline_replicas:
                    hosts.setdefault(replica, []).append(info)
        hws: dict[TopicPartitionKey, int] = {}
        leos: dict[tuple[TopicPartitionKey, int], int] = {}
        waiting = {*(("hw", b) for b in leaders), *(("leo", b) for b in hosts)}
        deadline = trio.current_time() + timeout_ms / 1000
        fan_out = trio.CancelScope(deadline=deadline)

        def answered(kind: str, broker: int) -> None:
            waiting.discard((kind, broker))
            fan_out.deadline = min(deadline, trio.current_time() + DESCRIBE_STRAGGLER_MS / 1000)

        async def high_watermarks(broker: int, parts: list[PartitionInfo]) -> None:
            hws.update(await self._latest_offsets(broker, parts, CONSUMER_REPLICA_ID, timeout_ms))
            answered("hw", broker)

        async def log_end_offsets(broker: int, parts: list[PartitionInfo]) -> None:
            found = await self._latest_offsets(broker, parts, DEBUG_REPLICA_ID, timeout_ms)
            leos.update(((tp, broker), offset) for tp, offset in found.items())
            answered("leo", broker)

        with fan_out:
            async with trio.open_nursery() as nursery:
                for broker, parts in leaders.items():
                    nursery.start_soon(high_watermarks, broker, parts)
                for broker, parts in hosts.items():
                    nursery.start_soon(log_end_offsets, broker, parts)
        for _, broker in waiting:
            self.metadata.mark_silent(broker)
        return hws, leos

    async def _latest_offsets(
        self, broker: int, parts: Sequence[PartitionInfo], replica_id: int, timeout_ms: int
    ) -> dict[TopicPartitionKey, int]:
        """ListOffsets latest for `parts` from one broker: {} if it does not answer in time;
        partitions it answers with an error are left out. The consumer's request carries the
        leader epoch (a deposed leader is fenced); the debug one skips the check, as a
        follower may not have heard of the newest epoch yet."""
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for info in parts:
            epoch = info.leader_epoch if replica_id == CONSUMER_REPLICA_ID else -1
            topics.setdefault(info.topic, []).append(
                ListOffsetsPartition(info.partition, LATEST_TIMESTAMP, epoch)
            )
        request = ListOffsetsRequest(
            replica_id, tuple(ListOffsetsTopic(t, tuple(ps)) for t, ps in topics.items())
        )
        response: ListOffsetsResponse | None = None
        with trio.move_on_after(timeout_ms / 1000):  # connecting included
            try:
                response = await self.metadata.request(broker, request, timeout_ms=timeout_ms)
            except BrokerConnectionError:
                self.metadata.request_update()
        if response is None:
            return {}
        return {
            (t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }


def _describe_partition(
    info: PartitionInfo,
    hws: Mapping[TopicPartitionKey, int],
    leos: Mapping[tuple[TopicPartitionKey, int], int],
) -> PartitionDescription:
    tp = (info.topic, info.partition)
    return PartitionDescription(
        info.partition,
        info.leader,
        info.leader_epoch,
        info.replicas,
        info.isr,
        info.offline_replicas,
        hws.get(tp),
        leos.get((tp, info.leader)),
        {replica: leos.get((tp, replica)) for replica in info.replicas},
    )
