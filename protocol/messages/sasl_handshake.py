"""SaslHandshake (key 17): the client names its SASL mechanism; the broker lists its own."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16

__all__ = ["SaslHandshakeRequest", "SaslHandshakeResponse"]


@dataclass(frozen=True, slots=True)
class SaslHandshakeRequest:
    mechanism: str


@dataclass(frozen=True, slots=True)
class SaslHandshakeResponse:
    error_code: Int16
    mechanisms: tuple[str, ...]
