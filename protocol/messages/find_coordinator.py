"""FindCoordinator (key 10): which broker coordinates a group (its offsets partition's leader)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "GROUP_KEY_TYPE",
    "Coordinator",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
]

GROUP_KEY_TYPE = 0  # Kafka's CoordinatorType.GROUP (1, transactions, is not served)


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequest:
    coordinator_keys: tuple[str, ...]  # group ids
    key_type: Int8 = GROUP_KEY_TYPE


@dataclass(frozen=True, slots=True)
class Coordinator:
    key: str
    node_id: Int32
    host: str
    port: Int32
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponse:
    coordinators: tuple[Coordinator, ...]
    throttle_time_ms: Int32 = 0
