"""LeaderAndIsr (key 4): controller -> broker, "you lead / follow these partitions"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.messages.common import BrokerEndpoint
from protocol.schema import Int16, Int32, Int64, Since

__all__ = [
    "LeaderAndIsrPartitionError",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    topic_name: str
    partition_index: Int32
    controller_epoch: Int32
    leader: Int32
    leader_epoch: Int32
    isr: tuple[Int32, ...]
    partition_epoch: Int32  # the partition state znode's version (Kafka's zkVersion)
    replicas: tuple[Int32, ...]
    adding_replicas: tuple[Int32, ...] = ()
    removing_replicas: tuple[Int32, ...] = ()
    is_new: bool = False
    # v1: a reassignment's throttle on its adding replicas' catch-up (-1: none).
    replication_throttle_bytes_per_sec: Annotated[Int64, Since(1)] = -1
    # v2: the topic's id (KIP-516; Kafka's LeaderAndIsr v5+), "" for none. A broker whose
    # log holds another id answers INCONSISTENT_TOPIC_ID; a log without one takes it.
    topic_id: Annotated[str, Since(2)] = ""


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    controller_id: Int32
    controller_epoch: Int32
    broker_epoch: Int64
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[BrokerEndpoint, ...]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionError:
    topic_name: str
    partition_index: Int32
    error_code: Int16


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    error_code: Int16
    partition_errors: tuple[LeaderAndIsrPartitionError, ...] = ()
