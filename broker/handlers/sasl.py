"""SaslHandshake and SaslAuthenticate outside a SASL exchange: on a listener that is not SASL,
or after the connection has authenticated (Kafka has no re-authentication here either:
KIP-368 is not implemented). The exchange itself is the server's (broker/server.py)."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["handle_sasl_authenticate", "handle_sasl_handshake"]


async def handle_sasl_handshake(
    ctx: BrokerContext, header: RequestHeader, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, ())


async def handle_sasl_authenticate(
    ctx: BrokerContext, header: RequestHeader, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        ErrorCode.ILLEGAL_SASL_STATE,
        "SaslAuthenticate outside a SASL exchange (not a SASL listener, or authenticated)",
        b"",
    )
