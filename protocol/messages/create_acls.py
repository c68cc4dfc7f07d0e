"""CreateAcls (key 30): add ACL bindings (Kafka's codes for the enums, see the spec)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = ["AclCreation", "AclCreationResult", "CreateAclsRequest", "CreateAclsResponse"]


@dataclass(frozen=True, slots=True)
class AclCreation:
    resource_type: Int8
    resource_name: str
    resource_pattern_type: Int8
    principal: str
    host: str
    operation: Int8
    permission_type: Int8


@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...]


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class CreateAclsResponse:
    results: tuple[AclCreationResult, ...]
    throttle_time_ms: Int32 = 0
