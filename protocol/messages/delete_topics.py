"""DeleteTopics (key 20). v1 adds topic ids (KIP-516): topics may be named by id, and each
result carries its topic's id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.schema import Int16, Int32, Since

__all__ = ["DeletableTopicResult", "DeleteTopicsRequest", "DeleteTopicsResponse"]


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...]
    timeout_ms: Int32
    topic_ids: Annotated[tuple[str, ...], Since(1)] = ()  # topics named by id


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str  # "": asked for by an id no topic has (or may not be described)
    error_code: Int16
    error_message: str | None = None
    topic_id: Annotated[str, Since(1)] = ""


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...]
    throttle_time_ms: Int32 = 0
