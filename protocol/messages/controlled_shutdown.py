"""ControlledShutdown (key 7): broker -> controller, "move my leaderships away before I stop"."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages.common import TopicPartitionRef
from protocol.schema import Int16, Int32, Int64

__all__ = ["ControlledShutdownRequest", "ControlledShutdownResponse"]


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    broker_id: Int32
    broker_epoch: Int64


@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    error_code: Int16
    remaining_partitions: tuple[TopicPartitionRef, ...] = ()
