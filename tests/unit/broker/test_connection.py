"""A connection's state machine (broker.core.connection) with no sockets: bytes in, events out,
through every stage and every refusal."""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import pytest
from scramp import ScramClient

from broker.core.connection import (
    AnswerApiVersions,
    CheckPassword,
    Close,
    ConnectionEvent,
    ConnectionState,
    Handle,
    Muted,
    NeedData,
    SaslReply,
    SendRefusal,
    ServerConnection,
)
from broker.core.principal import Principal
from broker.core.sasl import SaslAuthenticator
from broker.core.sasl_session import SaslSession
from broker.core.scram import make_credential
from broker.kafka.wire import NATIVE_WIRE
from protocol.apis import ApiKey
from protocol.codec import RequestHeader, encode_request
from protocol.errors import ErrorCode
from protocol.framing import LENGTH_PREFIX_BYTES, frame
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.schema_compile import encode_struct

CREDENTIALS = {
    ("alice", m): make_credential(m, "alice-secret") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
}
SERVED = (ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
MAX_FRAME_BYTES = 1 << 20
AUTH_FRAME_BYTES = 512
ALICE = Principal("User", "alice")


def request(api_key: ApiKey, body: object, correlation_id: int = 1, version: int = 0) -> bytes:
    return encode_request(RequestHeader(api_key, version, correlation_id, "test"), body)


def metadata(correlation_id: int = 1) -> bytes:
    return request(ApiKey.METADATA, MetadataRequest(None), correlation_id)


def plaintext() -> ServerConnection:
    return ServerConnection(
        NATIVE_WIRE, max_frame_bytes=MAX_FRAME_BYTES, served_api_keys=SERVED, idle_timeout_s=600
    )


def state(conn: ServerConnection) -> ConnectionState:
    return conn.state  # read afresh (mypy would keep what an earlier assert narrowed it to)


def sasl_connection(
    max_reauth_ms: int = 0, now_s: float = 0.0, credentials: dict[Any, Any] = CREDENTIALS
) -> ServerConnection:
    sasl = SaslAuthenticator(
        ("SCRAM-SHA-256", "PLAIN"),
        lambda user, m: credentials.get((user, m)),
        fake_salt_key=b"k" * 32,
    )
    return ServerConnection(
        NATIVE_WIRE,
        max_frame_bytes=MAX_FRAME_BYTES,
        served_api_keys=SERVED,
        idle_timeout_s=600,
        sasl=sasl,
        session=SaslSession(max_reauth_ms),
        auth_frame_bytes=AUTH_FRAME_BYTES,
        auth_timeout_s=10,
        failed_authentication_delay_s=0.1,
        now_s=now_s,
    )


def fed(conn: ServerConnection, data: bytes, now_s: float = 0.0) -> ConnectionEvent:
    conn.receive_data(data)
    return conn.next_event(now_s)


def plain_login(conn: ServerConnection, password: str, now_s: float = 0.0) -> SaslReply:
    """SaslHandshake(PLAIN) and SaslAuthenticate, the password checked as the server does."""
    shake = fed(conn, request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("PLAIN")), now_s)
    assert isinstance(shake, SaslReply) and shake.response.error_code == 0
    assert shake.principal is None and not shake.close
    auth = SaslAuthenticateRequest(f"\0alice\0{password}".encode())
    check = fed(conn, request(ApiKey.SASL_AUTHENTICATE, auth, 2), now_s)
    assert isinstance(check, CheckPassword)
    assert check.deadline_s == conn.auth_deadline_s
    conn.password_checked(check.check.run(), now_s)
    reply = conn.next_event(now_s)
    assert isinstance(reply, SaslReply)
    return reply


def test_plaintext_hands_over_each_request_then_reads_again() -> None:
    conn = plaintext()
    assert conn.next_event(0) == NeedData(256 * 1024, None)
    frame = metadata()
    event = fed(conn, frame)
    assert isinstance(event, Handle)
    assert event.call.header.api_key == ApiKey.METADATA
    assert event.frame_bytes == len(frame)
    assert conn.busy and state(conn) is ConnectionState.HANDLING
    with pytest.raises(RuntimeError):
        conn.next_event(0)  # one request at a time: nothing is read while it is handled
    conn.handled(0, 0)
    assert state(conn) is ConnectionState.SERVING
    assert conn.next_event(0) == NeedData(256 * 1024, None)


def test_pipelined_requests_come_out_one_at_a_time_in_order() -> None:
    conn = plaintext()
    conn.receive_data(metadata(7) + metadata(8))
    first = conn.next_event(0)
    assert isinstance(first, Handle) and first.call.header.correlation_id == 7
    conn.handled(0, 0)
    second = conn.next_event(0)
    assert isinstance(second, Handle) and second.call.header.correlation_id == 8


def test_a_throttled_response_mutes_the_connection_until_its_time_has_passed() -> None:
    conn = plaintext()
    conn.receive_data(metadata(1) + metadata(2))
    assert isinstance(conn.next_event(100.0), Handle)
    conn.handled(250, 100.0)  # KIP-219
    assert conn.next_event(100.0) == Muted(100.25)
    assert conn.next_event(100.2) == Muted(100.25)
    after = conn.next_event(100.25)
    assert isinstance(after, Handle) and after.call.header.correlation_id == 2


def test_a_bad_frame_closes_with_its_reason() -> None:
    conn = plaintext()
    event = fed(conn, struct.pack(">i", MAX_FRAME_BYTES + 1))
    assert isinstance(event, Close) and event.message == "closing connection: bad frame"
    assert event.level == "warning" and "socket.request.max.bytes" in event.fields["error"]
    assert state(conn) is ConnectionState.CLOSED
    assert conn.next_event(0) == Close()


def test_an_undecodable_request_closes_but_an_unknown_api_versions_version_is_answered() -> None:
    conn = plaintext()
    header = encode_struct(RequestHeader(ApiKey.API_VERSIONS, 99, 5, "test"), 0)
    unsupported = frame(msgpack.packb([header, {}]))
    event = fed(conn, unsupported)
    assert isinstance(event, SendRefusal) and event.frame  # KIP-511's fallback
    bad = fed(conn, frame(b"\xc1"))  # not msgpack
    assert isinstance(bad, Close) and bad.message == "closing connection: bad request"
    assert bad.fields["wire"] == "highwater"


def test_an_api_without_a_handler_closes() -> None:
    conn = ServerConnection(
        NATIVE_WIRE,
        max_frame_bytes=MAX_FRAME_BYTES,
        served_api_keys=(ApiKey.API_VERSIONS,),
        idle_timeout_s=600,
    )
    event = fed(conn, metadata())
    assert isinstance(event, Close) and event.message == "closing connection: api not served"
    assert event.fields == {"api_key": ApiKey.METADATA}


def test_before_authentication_frames_are_small_and_reads_have_a_deadline() -> None:
    conn = sasl_connection(now_s=5.0)
    assert state(conn) is ConnectionState.AUTHENTICATING
    # The read deadline: the earlier of the idle timeout and the authentication timeout.
    assert conn.next_event(6.0) == NeedData(AUTH_FRAME_BYTES + LENGTH_PREFIX_BYTES, 15.0)
    big = fed(conn, struct.pack(">i", AUTH_FRAME_BYTES + 1), 6.0)
    assert isinstance(big, Close) and big.message == "closing connection: bad frame"


def test_a_read_past_the_authentication_deadline_closes() -> None:
    conn = sasl_connection()
    assert isinstance(conn.next_event(0), NeedData)
    close = conn.deadline_passed()
    assert close.message == "closing connection: not authenticated in time"
    assert state(conn) is ConnectionState.CLOSED


def test_only_api_versions_and_the_sasl_requests_before_authentication() -> None:
    conn = sasl_connection()
    versions = fed(conn, request(ApiKey.API_VERSIONS, ApiVersionsRequest()))
    assert isinstance(versions, AnswerApiVersions)
    refused = fed(conn, metadata(2))
    assert isinstance(refused, Close)
    assert refused.message == "closing connection: request before authentication"
    assert refused.level == "warning"
    assert refused.fields == {"api_key": ApiKey.METADATA, "stage": "handshake"}


def test_a_sasl_authenticate_before_the_handshake_is_refused() -> None:
    conn = sasl_connection()
    auth = SaslAuthenticateRequest(b"\0alice\0alice-secret")
    refused = fed(conn, request(ApiKey.SASL_AUTHENTICATE, auth))
    assert isinstance(refused, Close)
    assert refused.message == "closing connection: request before authentication"


def test_a_plain_login_authenticates_then_serves_with_the_large_frames() -> None:
    conn = sasl_connection()
    reply = plain_login(conn, "alice-secret")
    assert reply.principal == ALICE and not reply.reauthenticated and not reply.close
    assert reply.mechanism == "PLAIN" and reply.delay_s == 0
    assert state(conn) is ConnectionState.SERVING
    assert conn.decoder.max_frame_bytes == MAX_FRAME_BYTES
    assert conn.auth_deadline_s == math.inf
    assert conn.next_event(0) == NeedData(256 * 1024, None)
    assert isinstance(fed(conn, metadata(3)), Handle)


def test_a_wrong_password_is_answered_after_the_delay_then_closes() -> None:
    conn = sasl_connection()
    reply = plain_login(conn, "wrong")
    assert reply.close and reply.principal is None and reply.delay_s == 0.1
    assert reply.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    close = conn.next_event(0)
    assert isinstance(close, Close)
    assert close.message == "closing connection: authentication failed"
    assert close.fields["mechanism"] == "PLAIN"
    assert close.fields["error"] == "SASL_AUTHENTICATION_FAILED"
    assert conn.next_event(0) == Close()


def test_a_password_check_not_done_by_the_deadline_closes() -> None:
    conn = sasl_connection()
    fed(conn, request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("PLAIN")))
    auth = SaslAuthenticateRequest(b"\0alice\0alice-secret")
    assert isinstance(fed(conn, request(ApiKey.SASL_AUTHENTICATE, auth, 2)), CheckPassword)
    conn.password_checked(None, 10.0)
    close = conn.next_event(10.0)
    assert isinstance(close, Close)
    assert close.message == "closing connection: not authenticated in time"


def test_a_scram_login_completes_in_two_steps() -> None:
    conn = sasl_connection()
    shake = fed(conn, request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("SCRAM-SHA-256")))
    assert isinstance(shake, SaslReply) and shake.response.error_code == 0
    client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    first_request = SaslAuthenticateRequest(client.get_client_first().encode())
    first = fed(conn, request(ApiKey.SASL_AUTHENTICATE, first_request, 2))
    assert isinstance(first, SaslReply) and first.principal is None
    assert state(conn) is ConnectionState.AUTHENTICATING
    client.set_server_first(first.response.auth_bytes.decode())
    final_request = SaslAuthenticateRequest(client.get_client_final().encode())
    final = fed(conn, request(ApiKey.SASL_AUTHENTICATE, final_request, 3))
    assert isinstance(final, SaslReply) and final.principal == ALICE
    assert state(conn) is ConnectionState.SERVING


def test_the_session_lifetime_goes_out_and_an_expired_session_closes() -> None:
    conn = sasl_connection(max_reauth_ms=1000)
    reply = plain_login(conn, "alice-secret", now_s=1.0)
    assert reply.response.session_lifetime_ms == 1000
    assert isinstance(fed(conn, metadata(3), 1.5), Handle)
    conn.handled(0, 1.5)
    expired = fed(conn, metadata(4), 2.5)
    assert isinstance(expired, Close)
    assert expired.message == "closing connection: authentication session expired"


def test_a_handshake_on_an_authenticated_connection_reauthenticates() -> None:
    conn = sasl_connection(max_reauth_ms=1000)
    plain_login(conn, "alice-secret", now_s=0.0)
    # Even after the session's end (KIP-368): the handshake comes first.
    reply = plain_login(conn, "alice-secret", now_s=3.0)
    assert reply.principal == ALICE and reply.reauthenticated and not reply.close
    assert conn.session is not None and conn.session.reauthentications == 1
    assert isinstance(fed(conn, metadata(5), 3.5), Handle)


def test_reauthentication_uses_the_small_frames_and_a_new_deadline() -> None:
    conn = sasl_connection()
    plain_login(conn, "alice-secret")
    shake = fed(conn, request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("PLAIN")), 50.0)
    assert isinstance(shake, SaslReply)
    assert state(conn) is ConnectionState.AUTHENTICATING
    assert conn.decoder.max_frame_bytes == AUTH_FRAME_BYTES
    assert conn.next_event(50.0) == NeedData(AUTH_FRAME_BYTES + LENGTH_PREFIX_BYTES, 60.0)
    refused = fed(conn, metadata(6), 51.0)
    assert isinstance(refused, Close)
    assert refused.message == "closing connection: request before authentication"


def test_reauthentication_as_another_principal_is_refused_and_closes() -> None:
    credentials = dict(CREDENTIALS)
    credentials[("bob", "SCRAM-SHA-256")] = make_credential("SCRAM-SHA-256", "bob-secret")
    conn = sasl_connection(credentials=credentials)
    plain_login(conn, "alice-secret")
    fed(conn, request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("PLAIN")))
    auth = SaslAuthenticateRequest(b"\0bob\0bob-secret")
    check = fed(conn, request(ApiKey.SASL_AUTHENTICATE, auth, 2))
    assert isinstance(check, CheckPassword)
    conn.password_checked(check.check.run(), 0)
    reply = conn.next_event(0)
    assert isinstance(reply, SaslReply) and reply.close and reply.principal is None
    assert reply.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in reply.response.error_message
    close = conn.next_event(0)
    assert isinstance(close, Close)
    assert close.message == "closing connection: authentication failed"


def test_a_revoked_connection_closes_after_the_request_in_hand() -> None:
    conn = sasl_connection()
    plain_login(conn, "alice-secret")
    conn.receive_data(metadata(3) + metadata(4))
    assert isinstance(conn.next_event(0), Handle)
    conn.revoke()  # the user's credentials changed meanwhile
    assert conn.busy
    conn.handled(0, 0)
    assert conn.next_event(0) == Close()  # already logged by whoever revoked it
