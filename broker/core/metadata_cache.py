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
from protocol.topic_id import NO_TOPIC_ID
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
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)  # inter-broker listener
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    # Per listener name, each live broker's address on it (brokers that have that listener).
    by_listener: dict[str, dict[int, BrokerEndpoint]] = field(default_factory=dict)
    _unnamed: frozenset[int] = frozenset()  # live brokers whose listeners are not known
    # Topic ids (KIP-516) both ways, as the controller sent them.
    topic_ids: dict[str, str] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)

    def update(self, request: UpdateMetadataRequest) -> list[str]:
        """Apply an UpdateMetadata; returns the topics it deleted."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.node_id: b for b in request.live_brokers}
        by_listener: dict[str, dict[int, BrokerEndpoint]] = {}
        named = set()
        for listeners in request.live_broker_listeners:
            inter_broker = self.brokers.get(listeners.node_id)
            if inter_broker is None:
                continue
            named.add(listeners.node_id)
            for e in listeners.endpoints:
                by_listener.setdefault(e.listener, {})[listeners.node_id] = BrokerEndpoint(
                    listeners.node_id, e.host, e.port, inter_broker.rack
                )
        self.by_listener = by_listener
        self._unnamed = frozenset(self.brokers.keys() - named)
        for state in request.partition_states:
            self._set_partition(state)
        for entry in request.topic_ids:
            self._set_topic_id(entry.topic_name, entry.topic_id)
        deleted = [name for name in request.deleted_topics if self.topics.pop(name, None)]
        for name in request.deleted_topics:
            self.topic_names.pop(self.topic_ids.pop(name, ""), None)
        return deleted

    def _set_topic_id(self, name: str, topic_id: str) -> None:
        old = self.topic_ids.get(name)
        if old == topic_id:
            return
        if old is not None:
            self.topic_names.pop(old, None)
        self.topic_ids[name] = topic_id
        self.topic_names[topic_id] = name

    def topic_id(self, name: str) -> str:
        """The topic's id, or NO_TOPIC_ID if it has none (or is unknown)."""
        return self.topic_ids.get(name, NO_TOPIC_ID)

    def topic_name(self, topic_id: str) -> str | None:
        """The name of the topic with this id; None: no such topic."""
        return self.topic_names.get(topic_id)

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

    def brokers_on(self, listener: str | None) -> dict[int, BrokerEndpoint]:
        """The live brokers' addresses on `listener` (None: the inter-broker one). As Kafka, a
        broker without that listener is left out; one whose listeners are unknown (an older
        controller) is given at its inter-broker address."""
        if listener is None:
            return self.brokers
        found = dict(self.by_listener.get(listener, {}))
        for broker_id in self._unnamed:
            found[broker_id] = self.brokers[broker_id]
        return found

    def topic_metadata(
        self, names: Iterable[str] | None, listener: str | None = None
    ) -> tuple[MetadataTopic, ...]:
        """Metadata for `names` (every topic if None); unknown names get
        UNKNOWN_TOPIC_OR_PARTITION, as in Kafka. A leader live but without `listener`:
        LISTENER_NOT_FOUND (Kafka's MetadataCache)."""
        wanted = sorted(self.topics) if names is None else list(names)
        reachable = self.brokers_on(listener)
        return tuple(self.topic(name, reachable) for name in wanted)

    def topic(self, name: str, reachable: dict[int, BrokerEndpoint]) -> MetadataTopic:
        partitions = self.topics.get(name)
        if partitions is None:
            return MetadataTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name, ())
        return MetadataTopic(
            ErrorCode.NONE,
            name,
            tuple(
                self._partition(index, info, reachable)
                for index, info in sorted(partitions.items())
            ),
            is_internal=name in INTERNAL_TOPICS,
            topic_id=self.topic_id(name),
        )

    def topic_metadata_by_id(
        self, topic_ids: Iterable[str], listener: str | None = None
    ) -> tuple[MetadataTopic, ...]:
        """Metadata for topics named by id; an unknown id gets UNKNOWN_TOPIC_ID and no name,
        as in Kafka."""
        reachable = self.brokers_on(listener)
        out = []
        for topic_id in topic_ids:
            name = self.topic_names.get(topic_id)
            if name is None or name not in self.topics:
                out.append(MetadataTopic(ErrorCode.UNKNOWN_TOPIC_ID, "", (), topic_id=topic_id))
            else:
                out.append(self.topic(name, reachable))
        return tuple(out)

    def _partition(
        self, index: int, info: PartitionInfo, reachable: dict[int, BrokerEndpoint]
    ) -> MetadataPartition:
        live = self.brokers
        offline = tuple(r for r in info.replicas if r not in live or r in info.offline_replicas)
        error = ErrorCode.NONE
        if info.leader == NO_LEADER or info.leader not in live:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        elif info.leader not in reachable:
            error = ErrorCode.LISTENER_NOT_FOUND
        return MetadataPartition(
            error_code=error,
            partition_index=index,
            leader_id=info.leader if info.leader in live else NO_LEADER,
            leader_epoch=info.leader_epoch,
            replica_nodes=info.replicas,
            isr_nodes=info.isr,
            offline_replicas=offline,
        )
