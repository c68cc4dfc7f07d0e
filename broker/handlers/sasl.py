"""SaslHandshake and SaslAuthenticate on a listener that is not SASL. On a SASL listener the
server runs the exchange itself (broker/server.py), a SaslHandshake after authentication
included: that is a re-authentication (KIP-368, broker.core.sasl_session)."""

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
        "SaslAuthenticate outside a SASL exchange (not a SASL listener, or no SaslHandshake)",
        b"",
    )
