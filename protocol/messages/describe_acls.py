"""DescribeAcls (key 29): the ACL bindings a filter matches, grouped by resource pattern."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "AclDescription",
    "AclFilterSpec",
    "DescribeAclsRequest",
    "DescribeAclsResource",
    "DescribeAclsResponse",
]


@dataclass(frozen=True, slots=True)
class AclFilterSpec:
    """Kafka's AclBindingFilter: nil and ANY (1) match anything; pattern type MATCH (2)
    matches every pattern that applies to the named resource."""

    resource_type: Int8 = 1
    resource_name: str | None = None
    pattern_type: Int8 = 1
    principal: str | None = None
    host: str | None = None
    operation: Int8 = 1
    permission_type: Int8 = 1


@dataclass(frozen=True, slots=True)
class DescribeAclsRequest:
    filter: AclFilterSpec


@dataclass(frozen=True, slots=True)
class AclDescription:
    principal: str
    host: str
    operation: Int8
    permission_type: Int8


@dataclass(frozen=True, slots=True)
class DescribeAclsResource:
    resource_type: Int8
    resource_name: str
    pattern_type: Int8
    acls: tuple[AclDescription, ...]


@dataclass(frozen=True, slots=True)
class DescribeAclsResponse:
    error_code: Int16
    error_message: str | None = None
    resources: tuple[DescribeAclsResource, ...] = ()
    throttle_time_ms: Int32 = 0
