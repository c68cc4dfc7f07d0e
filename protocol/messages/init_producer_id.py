"""InitProducerId (key 22): a cluster-unique producer id and epoch for the idempotent producer."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32, Int64

__all__ = ["InitProducerIdRequest", "InitProducerIdResponse"]


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    transaction_timeout_ms: Int32
    transactional_id: str | None = None
    producer_id: Int64 = -1  # set with producer_epoch to bump an existing producer's epoch
    producer_epoch: Int16 = -1


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error_code: Int16
    producer_id: Int64 = -1
    producer_epoch: Int16 = -1
    throttle_time_ms: Int32 = 0
