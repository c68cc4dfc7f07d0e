"""DeleteAcls (key 31): remove the ACL bindings each filter matches; the answer lists them."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages.describe_acls import AclFilterSpec
from protocol.schema import Int8, Int16, Int32

__all__ = [
    "AclFilterSpec",
    "DeleteAclsFilterResult",
    "DeleteAclsMatchingAcl",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
]


@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    filters: tuple[AclFilterSpec, ...]


@dataclass(frozen=True, slots=True)
class DeleteAclsMatchingAcl:
    error_code: Int16
    error_message: str | None
    resource_type: Int8
    resource_name: str
    pattern_type: Int8
    principal: str
    host: str
    operation: Int8
    permission_type: Int8


@dataclass(frozen=True, slots=True)
class DeleteAclsFilterResult:
    error_code: Int16
    error_message: str | None = None
    matching_acls: tuple[DeleteAclsMatchingAcl, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteAclsResponse:
    filter_results: tuple[DeleteAclsFilterResult, ...]
    throttle_time_ms: Int32 = 0
