"""ElectLeaders (key 43): admin -> controller, "elect the preferred (or any live) replica"."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectionType",
    "PartitionElectionResult",
    "ReplicaElectionResult",
    "TopicPartitions",
]


class ElectionType(enum.IntEnum):
    """Kafka's ElectionType: the preferred replica, or (an operator's explicit choice that
    may lose committed records) any live replica of a leaderless partition."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str
    partitions: tuple[Int32, ...]


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    election_type: Int8
    topic_partitions: tuple[TopicPartitions, ...] | None  # nil: every partition
    timeout_ms: Int32


@dataclass(frozen=True, slots=True)
class PartitionElectionResult:
    partition_id: Int32
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaElectionResult:
    topic: str
    partition_result: tuple[PartitionElectionResult, ...]


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error_code: Int16
    replica_election_results: tuple[ReplicaElectionResult, ...] = ()
    throttle_time_ms: Int32 = 0
