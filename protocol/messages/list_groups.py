"""ListGroups (key 16): the groups this broker coordinates, with their states."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = ["ListGroupsRequest", "ListGroupsResponse", "ListedGroup"]


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()  # empty: every state


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str = "consumer"
    group_state: str = ""
    group_type: str = "consumer"


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error_code: Int16
    groups: tuple[ListedGroup, ...] = ()
    throttle_time_ms: Int32 = 0
