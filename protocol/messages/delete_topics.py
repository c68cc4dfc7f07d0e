"""DeleteTopics (key 20)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = ["DeletableTopicResult", "DeleteTopicsRequest", "DeleteTopicsResponse"]


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...]
    timeout_ms: Int32


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...]
    throttle_time_ms: Int32 = 0
