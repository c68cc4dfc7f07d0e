"""Produce (key 0): record batches for partition leaders to append."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32, Int64

__all__ = [
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProduceTopicData",
    "ProduceTopicResponse",
]


@dataclass(frozen=True, slots=True)
class ProducePartitionData:
    index: Int32
    records: bytes  # one or more record batches, exactly as the producer built them


@dataclass(frozen=True, slots=True)
class ProduceTopicData:
    name: str
    partition_data: tuple[ProducePartitionData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    acks: Int16  # 0, 1 or -1 (all)
    timeout_ms: Int32
    topic_data: tuple[ProduceTopicData, ...]
    transactional_id: str | None = None


@dataclass(frozen=True, slots=True)
class ProducePartitionResponse:
    index: Int32
    error_code: Int16
    base_offset: Int64 = -1
    log_append_time_ms: Int64 = -1
    log_start_offset: Int64 = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ProduceTopicResponse:
    name: str
    partition_responses: tuple[ProducePartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    responses: tuple[ProduceTopicResponse, ...]
    throttle_time_ms: Int32 = 0
