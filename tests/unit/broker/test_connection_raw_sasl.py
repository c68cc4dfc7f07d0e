"""Raw SASL tokens after a SaslHandshake v0 on the Kafka wire (broker.core.connection), as
Kafka's SaslServerAuthenticator reads them for a client that does not send SaslAuthenticate:
no request header, the server's token alone in answer, a failure closes without one."""

from __future__ import annotations

import struct

from scramp import ScramClient

from broker.core.connection import (
    CheckPassword,
    Close,
    ConnectionEvent,
    ConnectionState,
    Handle,
    SaslReply,
    ServerConnection,
)
from broker.core.principal import Principal
from broker.core.sasl import SaslAuthenticator
from broker.core.sasl_session import SaslSession
from broker.kafka.wire import KAFKA_WIRE
from protocol.apis import ApiKey
from protocol.framing import frame
from tests.unit.broker.test_connection import AUTH_FRAME_BYTES, CREDENTIALS, MAX_FRAME_BYTES, SERVED

ALICE = Principal("User", "alice")


def kafka_connection() -> ServerConnection:
    sasl = SaslAuthenticator(
        ("SCRAM-SHA-256", "PLAIN"),
        lambda user, m: CREDENTIALS.get((user, m)),
        fake_salt_key=b"k" * 32,
    )
    return ServerConnection(
        KAFKA_WIRE,
        max_frame_bytes=MAX_FRAME_BYTES,
        served_api_keys=SERVED,
        idle_timeout_s=600,
        sasl=sasl,
        session=SaslSession(0),
        auth_frame_bytes=AUTH_FRAME_BYTES,
        auth_timeout_s=10,
        failed_authentication_delay_s=0.1,
    )


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def handshake(mechanism: str, version: int, correlation_id: int = 1) -> bytes:
    """A Kafka SaslHandshake (request header v1, then the mechanism), framed."""
    header = struct.pack(">hhi", ApiKey.SASL_HANDSHAKE, version, correlation_id)
    return frame(header + _string("kcat") + _string(mechanism))


def metadata_v0(correlation_id: int) -> bytes:
    header = struct.pack(">hhi", ApiKey.METADATA, 0, correlation_id)
    return frame(header + _string("kcat") + struct.pack(">i", 0))


def fed(conn: ServerConnection, data: bytes) -> ConnectionEvent:
    conn.receive_data(data)
    return conn.next_event(0.0)


def test_scram_tokens_follow_a_v0_handshake_raw() -> None:
    conn = kafka_connection()
    shake = fed(conn, handshake("SCRAM-SHA-256", 0))
    assert isinstance(shake, SaslReply) and shake.response.error_code == 0
    assert not shake.raw  # the handshake itself is answered with a Kafka response
    client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    first = fed(conn, frame(client.get_client_first().encode()))
    assert isinstance(first, SaslReply) and first.raw and first.principal is None
    client.set_server_first(first.response.auth_bytes.decode())
    final = fed(conn, frame(client.get_client_final().encode()))
    assert isinstance(final, SaslReply) and final.raw and final.principal == ALICE
    client.set_server_final(final.response.auth_bytes.decode())  # the server proved itself
    assert conn.state is ConnectionState.SERVING
    # Authenticated: Kafka requests with headers again.
    event = fed(conn, metadata_v0(5))
    assert isinstance(event, Handle) and event.call.header.api_key == ApiKey.METADATA


def test_a_plain_token_after_a_v0_handshake_is_checked_and_answered_raw() -> None:
    conn = kafka_connection()
    assert isinstance(fed(conn, handshake("PLAIN", 0)), SaslReply)
    check = fed(conn, frame(b"\0alice\0alice-secret"))
    assert isinstance(check, CheckPassword)
    conn.password_checked(check.check.run(), 0.0)
    reply = conn.next_event(0.0)
    assert isinstance(reply, SaslReply) and reply.raw and not reply.close
    assert reply.principal == ALICE and reply.response.auth_bytes == b""
    assert conn.state is ConnectionState.SERVING


def test_a_wrong_raw_token_closes_without_an_answer() -> None:
    conn = kafka_connection()
    assert isinstance(fed(conn, handshake("PLAIN", 0)), SaslReply)
    check = fed(conn, frame(b"\0alice\0wrong"))
    assert isinstance(check, CheckPassword)
    conn.password_checked(check.check.run(), 0.0)
    reply = conn.next_event(0.0)
    assert isinstance(reply, SaslReply) and reply.raw and reply.close
    assert reply.delay_s == 0.1  # connection.failed.authentication.delay.ms, then the close
    assert isinstance(conn.next_event(0.0), Close)


def test_a_v1_handshake_is_followed_by_sasl_authenticate_not_raw_tokens() -> None:
    conn = kafka_connection()
    assert isinstance(fed(conn, handshake("PLAIN", 1)), SaslReply)
    # A raw PLAIN token is not a SaslAuthenticate request: it cannot be read as one.
    refused = fed(conn, frame(b"\0alice\0alice-secret"))
    assert isinstance(refused, Close)
