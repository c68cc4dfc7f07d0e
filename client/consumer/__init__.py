"""The consumer (Kafka's KafkaConsumer): `Consumer`, and what its callers name.

Kafka's seams, one module each: consumer.py (the facade), fetcher.py (Fetch and the record
buffers), positions.py (resets, KIP-320 validation), partition_state.py (one partition's
position and buffer); for a group member, membership.py (its pure core), group.py (the
heartbeat task), group_session.py (reconciliation, commits), coordinator.py (FindCoordinator)
and commits.py (OffsetCommit, OffsetFetch). docs/architecture.md ("client/") and
docs/groups.md give the design.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client.consumer.commits import OffsetAndMetadata
    from client.consumer.consumer import Consumer, GroupMetadata
    from client.consumer.fetcher import LEADER_ERRORS
    from client.consumer.group import RebalanceListener
    from client.consumer.partition_state import ConsumerRecord
    from client.consumer.positions import truncation_offset
    from protocol.topic_partition import TopicPartition

# Loaded when first named (PEP 562): the admin client uses commits.py and coordinator.py alone,
# and importing the whole consumer for them cost every admin command about 120 ms at start.
_HOMES = {
    "LEADER_ERRORS": "client.consumer.fetcher",
    "Consumer": "client.consumer.consumer",
    "ConsumerRecord": "client.consumer.partition_state",
    "GroupMetadata": "client.consumer.consumer",
    "OffsetAndMetadata": "client.consumer.commits",
    "RebalanceListener": "client.consumer.group",
    "TopicPartition": "protocol.topic_partition",
    "truncation_offset": "client.consumer.positions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


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
