"""The consumer (Kafka's KafkaConsumer): `Consumer`, and what its callers name.

Kafka's seams, one module each: consumer.py (the facade), fetcher.py (Fetch and the record
buffers), positions.py (resets, KIP-320 validation), partition_state.py (one partition's
position and buffer); for a group member, membership.py (its pure core), group.py (the
heartbeat task), group_session.py (reconciliation, commits), coordinator.py (FindCoordinator)
and commits.py (OffsetCommit, OffsetFetch). docs/architecture.md ("client/") and
docs/groups.md give the design.
"""

from client.consumer.commits import OffsetAndMetadata
from client.consumer.consumer import Consumer, GroupMetadata
from client.consumer.fetcher import LEADER_ERRORS
from client.consumer.group import RebalanceListener
from client.consumer.partition_state import ConsumerRecord
from client.consumer.positions import truncation_offset
from protocol.topic_partition import TopicPartition

__all__ = [
    "LEADER_ERRORS",
    "Consumer",
    "ConsumerRecord",
    "GroupMetadata",
    "OffsetAndMetadata",
    "RebalanceListener",
    "TopicPartition",
    "truncation_offset",
]
