"""DeleteGroups (key 42): delete empty groups and their committed offsets."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = ["DeleteGroupsRequest", "DeleteGroupsResponse", "DeletedGroup"]


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    groups_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeletedGroup:
    group_id: str
    error_code: Int16


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[DeletedGroup, ...]
    throttle_time_ms: Int32 = 0
