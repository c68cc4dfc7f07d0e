"""What this broker believes about the cluster, as the controller last told it (UpdateMetadata).

Pure: no IO. Every broker answers Metadata requests from here, so clients can bootstrap from
any broker. As in Kafka, the cache only moves forward: an UpdateMetadata from an older
controller epoch is rejected before it gets here (see `broker.controller_requests`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.metadata import MetadataPartition, MetadataTopic
from protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest
from protocol.topic_partition import INTERNAL_TOPICS

__all__ = ["MetadataCache", "PartitionInfo"]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int
    offline_replicas: tuple[int, ...] = ()


@dataclass(slots=True)
class MetadataCache:
    controller_id: int = -1
    controller_epoch: int = -1
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)

    def update(self, request: UpdateMetadataRequest) -> list[str]:
        """Apply an UpdateMetadata; returns the topics it deleted."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.node_id: b for b in request.live_brokers}
        for state in request.partition_states:
            self._set_partition(state)
        deleted = [name for name in request.deleted_topics if self.topics.pop(name, None)]
        return deleted

    def _set_partition(self, state: UpdateMetadataPartitionState) -> None:
        self.topics.setdefault(state.topic_name, {})[state.partition_index] = PartitionInfo(
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=tuple(state.isr),
            replicas=tuple(state.replicas),
            partition_epoch=state.partition_epoch,
            offline_replicas=tuple(state.offline_replicas),
        )

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.topics.get(topic, {}).get(partition)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def topic_metadata(self, names: Iterable[str] | None) -> tuple[MetadataTopic, ...]:
        """Metadata for `names` (every topic if None); unknown names get
        UNKNOWN_TOPIC_OR_PARTITION, as in Kafka."""
        wanted = sorted(self.topics) if names is None else list(names)
        return tuple(self._topic(name) for name in wanted)

    def _topic(self, name: str) -> MetadataTopic:
        partitions = self.topics.get(name)
        if partitions is None:
            return MetadataTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name, ())
        return MetadataTopic(
            ErrorCode.NONE,
            name,
            tuple(self._partition(index, info) for index, info in sorted(partitions.items())),
            is_internal=name in INTERNAL_TOPICS,
        )

    def _partition(self, index: int, info: PartitionInfo) -> MetadataPartition:
        live = self.brokers
        offline = tuple(r for r in info.replicas if r not in live or r in info.offline_replicas)
        error = ErrorCode.NONE
        if info.leader == NO_LEADER or info.leader not in live:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        return MetadataPartition(
            error_code=error,
            partition_index=index,
            leader_id=info.leader if info.leader in live else NO_LEADER,
            leader_epoch=info.leader_epoch,
            replica_nodes=info.replicas,
            isr_nodes=info.isr,
            offline_replicas=offline,
        )
