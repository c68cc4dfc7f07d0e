"""ApiVersions (key 18): which APIs and versions the broker speaks."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = ["ApiVersionRange", "ApiVersionsRequest", "ApiVersionsResponse"]


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    pass


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    api_key: Int16
    min_version: Int16
    max_version: Int16


@dataclass(frozen=True, slots=True)
class ApiVersionsResponse:
    error_code: Int16
    api_keys: tuple[ApiVersionRange, ...]
    throttle_time_ms: Int32 = 0
