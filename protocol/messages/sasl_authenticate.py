"""SaslAuthenticate (key 36): one step of the mechanism's exchange, its bytes as they are."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int64

__all__ = ["SaslAuthenticateRequest", "SaslAuthenticateResponse"]


@dataclass(frozen=True, slots=True)
class SaslAuthenticateRequest:
    auth_bytes: bytes


@dataclass(frozen=True, slots=True)
class SaslAuthenticateResponse:
    error_code: Int16
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: Int64 = 0
