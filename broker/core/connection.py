"""One broker connection's life as a sans-IO state machine (after h11's `Connection`): bytes in
with `receive_data` (or straight into `decoder`), what to do next out of `next_event(now_s)`;
no sockets, no trio, no waiting. The server's per-connection task (broker/server.py) reads,
runs what it is handed, writes, and waits until the times it is told.

Stages (Kafka's SaslServerAuthenticator, SocketServer's Processor and its muted channels):
a SASL listener's connection starts AUTHENTICATING: frames of at most
`sasl.server.max.receive.size`, only ApiVersions, SaslHandshake and SaslAuthenticate in the
order broker.core.sasl admits them, all by `connections.authentication.timeout.ms`. Once the
exchange completes it is SERVING (a PLAINTEXT or SSL listener's connection starts there):
frames up to `socket.request.max.bytes`, one request handled at a time (HANDLING), after which
a throttled response (KIP-219) mutes the connection until its throttle time has passed. A
SaslHandshake on an authenticated connection re-runs the exchange (KIP-368,
broker.core.sasl_session); any other request after the session's end closes it, and so does
`revoke` (the user's credentials were deleted or changed), once the request in hand is
answered. Every close comes out as a `Close` with the log event to write.

After a SaslHandshake v0 on the Kafka wire, as Kafka's SaslServerAuthenticator does for a
client without SaslAuthenticate, the frames until the exchange completes are raw SASL tokens:
no request header; each is read as a SaslAuthenticate and answered with the server's token
alone (`SaslReply.raw`), and a failure closes the connection without an answer.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from broker.core.principal import Principal
from broker.core.sasl import PasswordCheck, SaslAuthenticator, SaslStage, SaslStep
from broker.core.sasl_session import Admission, SaslSession
from broker.kafka.wire import Call, Wire
from protocol.apis import ApiKey
from protocol.codec import RequestDecodeError, RequestHeader
from protocol.errors import ErrorCode, FrameError
from protocol.framing import LENGTH_PREFIX_BYTES, NEED_DATA, FrameDecoder
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse

__all__ = [
    "AnswerApiVersions",
    "CheckPassword",
    "Close",
    "ConnectionEvent",
    "ConnectionState",
    "Handle",
    "Muted",
    "NeedData",
    "SaslReply",
    "SendRefusal",
    "ServerConnection",
]

# Reads of an authenticated connection: at most this much per receive.
RECEIVE_BYTES = 256 * 1024


class ConnectionState(enum.Enum):
    AUTHENTICATING = "authenticating"  # the SASL exchange, first or again (KIP-368)
    SERVING = "serving"  # reading the next request
    HANDLING = "handling"  # a request's handler runs; nothing more is read
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class NeedData:
    """Read up to `receive_bytes` more. `deadline_s` (while authenticating): the time by which
    they must come, else call `deadline_passed`; None: the server's idle sweep bounds the
    wait (connections.max.idle.ms)."""

    receive_bytes: int
    deadline_s: float | None


@dataclass(frozen=True, slots=True)
class Muted:
    """KIP-219: read nothing before `until_s` (a throttled response went out)."""

    until_s: float


@dataclass(frozen=True, slots=True)
class SendRefusal:
    """Send this frame, the wire's answer to a request it could not decode."""

    frame: bytes


@dataclass(frozen=True, slots=True)
class AnswerApiVersions:
    """Before authentication: run the ApiVersions handler and send its response."""

    call: Call


@dataclass(frozen=True, slots=True)
class CheckPassword:
    """Run `check` (PLAIN's PBKDF2) off the event loop by `deadline_s`, then give the outcome
    to `password_checked` (None: not done by the deadline)."""

    check: PasswordCheck
    deadline_s: float


@dataclass(frozen=True, slots=True)
class SaslReply:
    """Wait `delay_s` (connection.failed.authentication.delay.ms on a failure), then send
    `response` to `call`. `principal`: the exchange completed as it (`reauthenticated`: on an
    already authenticated connection); `close`: the next event closes the connection.
    `raw`: the answer to a raw token (after a SaslHandshake v0): send `response.auth_bytes`
    as a frame of its own, and nothing on a failure."""

    call: Call
    response: Any
    delay_s: float = 0.0
    principal: Principal | None = None
    reauthenticated: bool = False
    mechanism: str | None = None
    close: bool = False
    raw: bool = False


@dataclass(frozen=True, slots=True)
class Handle:
    """Run the API's handler for `call` (its frame was `frame_bytes` long, with its length),
    send its response, then call `handled`."""

    call: Call
    frame_bytes: int


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection; `message` (None: nothing to log) at `level`, with `fields`."""

    message: str | None = None
    level: str = "info"
    fields: dict[str, Any] = field(default_factory=dict)


ConnectionEvent = (
    NeedData | Muted | SendRefusal | AnswerApiVersions | CheckPassword | SaslReply | Handle | Close
)

_NOT_IN_TIME = "closing connection: not authenticated in time"
# The header a raw SASL token is read under (it has none of its own).
_RAW_TOKEN = RequestHeader(ApiKey.SASL_AUTHENTICATE, 0, -1, None)


class ServerConnection:
    def __init__(
        self,
        wire: Wire,
        *,
        max_frame_bytes: int,
        served_api_keys: Collection[int],
        idle_timeout_s: float,
        sasl: SaslAuthenticator | None = None,
        session: SaslSession | None = None,
        auth_frame_bytes: int = 0,
        auth_timeout_s: float = math.inf,
        failed_authentication_delay_s: float = 0.0,
        now_s: float = 0.0,
    ) -> None:
        """`sasl` and `session` on a SASL listener (the connection then starts authenticating,
        by `now_s` + `auth_timeout_s`); `served_api_keys`: the APIs with a handler."""
        self.wire = wire
        self.max_frame_bytes = max_frame_bytes
        self.served_api_keys = frozenset(served_api_keys)
        self.idle_timeout_s = idle_timeout_s
        self.sasl = sasl
        self.session = session
        self.auth_frame_bytes = auth_frame_bytes
        self.auth_timeout_s = auth_timeout_s
        self.failed_authentication_delay_s = failed_authentication_delay_s
        self.revoked = False
        self.muted_until_s = -math.inf
        self._pending: deque[ConnectionEvent] = deque()  # the events that come next
        self._checking: Call | None = None  # the request whose password is being checked
        self._raw_tokens = False  # after a SaslHandshake v0: frames are raw SASL tokens
        if sasl is None:
            self.state = ConnectionState.SERVING
            self.auth_deadline_s = math.inf
            self.decoder = FrameDecoder(max_frame_bytes)
        else:
            self.state = ConnectionState.AUTHENTICATING
            self.auth_deadline_s = now_s + auth_timeout_s
            self.decoder = FrameDecoder(auth_frame_bytes)

    @property
    def busy(self) -> bool:
        """A request's handler is running (the connection is closed only after it answers)."""
        return self.state is ConnectionState.HANDLING

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self.decoder.receive_data(data)

    def revoke(self) -> None:
        """The user's credentials were deleted or changed: close after the request in hand."""
        self.revoked = True

    def deadline_passed(self) -> Close:
        """The authentication deadline of a `NeedData` or `CheckPassword` passed."""
        return self._close(_NOT_IN_TIME)

    def next_event(self, now_s: float) -> ConnectionEvent:
        if self._pending:
            return self._pending.popleft()
        if self.state is ConnectionState.CLOSED:
            return Close()
        if self.state is ConnectionState.HANDLING:
            raise RuntimeError("next_event while a request is handled: call handled first")
        if self.revoked:
            return self._close(None)
        if now_s < self.muted_until_s:
            return Muted(self.muted_until_s)
        authenticating = self.state is ConnectionState.AUTHENTICATING
        try:
            frame_body = self.decoder.next_frame()
        except FrameError as exc:
            return self._close("closing connection: bad frame", "warning", error=str(exc))
        if frame_body is NEED_DATA:
            if authenticating:
                deadline_s = min(now_s + self.idle_timeout_s, self.auth_deadline_s)
                return NeedData(self.auth_frame_bytes + LENGTH_PREFIX_BYTES, deadline_s)
            return NeedData(RECEIVE_BYTES, None)
        assert isinstance(frame_body, bytes | bytearray)
        if authenticating and self._raw_tokens:
            raw = Call(_RAW_TOKEN, SaslAuthenticateRequest(bytes(frame_body)))
            return self._authenticate(raw, now_s)
        try:
            call = self.wire.decode(frame_body)
        except RequestDecodeError as exc:
            refusal = self.wire.refusal(exc)
            if refusal is not None:
                return SendRefusal(refusal)
            return self._close(
                "closing connection: bad request", "warning", error=str(exc), wire=self.wire.name
            )
        api_key = call.header.api_key
        if self.session is not None and not authenticating:
            admission = self.session.admit(api_key, now_s * 1000)
            if admission is Admission.EXPIRED:
                return self._close("closing connection: authentication session expired")
            if admission is Admission.REAUTHENTICATE:  # KIP-368
                assert self.sasl is not None
                self.sasl.begin_reauthentication()
                self.state = ConnectionState.AUTHENTICATING
                self.decoder.max_frame_bytes = self.auth_frame_bytes
                self.auth_deadline_s = now_s + self.auth_timeout_s
                authenticating = True
        if authenticating:
            return self._authenticate(call, now_s)
        if api_key not in self.served_api_keys:
            return self._close("closing connection: api not served", "warning", api_key=api_key)
        self.state = ConnectionState.HANDLING
        return Handle(call, len(frame_body) + LENGTH_PREFIX_BYTES)

    def handled(self, throttle_ms: int, now_s: float) -> None:
        """The response to the `Handle` went out with `throttle_ms` (KIP-219): nothing more is
        read from the connection until that has passed (Kafka mutes the channel)."""
        if self.state is not ConnectionState.HANDLING:
            raise RuntimeError(f"handled in state {self.state.value}")
        self.state = ConnectionState.SERVING
        if throttle_ms > 0:
            self.muted_until_s = now_s + throttle_ms / 1000

    def password_checked(self, matches: bool | None, now_s: float) -> None:
        """The outcome of a `CheckPassword`; None: not known by its deadline (close)."""
        assert self.sasl is not None
        if matches is None:
            self._pending.append(self._close(_NOT_IN_TIME))
            return
        call, self._checking = self._checking, None
        assert call is not None
        # The answer first, then what follows it (a close on a failure).
        self._pending.appendleft(self._reply(call, self.sasl.password_checked(matches), now_s))

    def _authenticate(self, call: Call, now_s: float) -> ConnectionEvent:
        """A request before authentication, which may only be a SASL one, in order."""
        sasl = self.sasl
        assert sasl is not None
        header = call.header
        if not sasl.admits(header.api_key):
            return self._close(
                "closing connection: request before authentication",
                "warning",
                api_key=header.api_key,
                stage=sasl.stage.value,
            )
        if header.api_key == ApiKey.API_VERSIONS:
            return AnswerApiVersions(call)
        step = (
            sasl.handshake(call.body)
            if header.api_key == ApiKey.SASL_HANDSHAKE
            else sasl.authenticate(call.body)
        )
        if isinstance(step, PasswordCheck):
            self._checking = call
            return CheckPassword(step, self.auth_deadline_s)
        if header.api_key == ApiKey.SASL_HANDSHAKE and not step.close:
            self._raw_tokens = _handshake_v0(call)
        return self._reply(call, step, now_s)

    def _reply(self, call: Call, step: SaslStep, now_s: float) -> SaslReply:
        sasl, session = self.sasl, self.session
        assert sasl is not None
        reauthenticated = session is not None and session.principal is not None
        if step.principal is not None and session is not None:
            assert sasl.mechanism is not None
            step = _with_session(step, session, sasl.mechanism, now_s * 1000)
        if step.close:
            failed = self._close(
                "closing connection: authentication failed",
                mechanism=sasl.mechanism,
                error=ErrorCode(step.response.error_code).name,
                reason=getattr(step.response, "error_message", None),
            )
            self._pending.append(failed)
        elif sasl.stage is SaslStage.COMPLETE:
            self.state = ConnectionState.SERVING
            self.decoder.max_frame_bytes = self.max_frame_bytes
            self.auth_deadline_s = math.inf
            self._raw_tokens = False
        return SaslReply(
            call,
            step.response,
            delay_s=self.failed_authentication_delay_s if step.close else 0.0,
            principal=step.principal,
            reauthenticated=reauthenticated,
            mechanism=sasl.mechanism,
            close=step.close,
            raw=call.header is _RAW_TOKEN,
        )

    def _close(self, message: str | None, level: str = "info", **fields: Any) -> Close:
        self.state = ConnectionState.CLOSED
        return Close(message, level, fields)


def _handshake_v0(call: Call) -> bool:
    """A Kafka client's SaslHandshake v0: its tokens follow raw (Kafka's
    SaslServerAuthenticator reads SaslAuthenticate only after a v1 handshake)."""
    return call.kafka is not None and call.kafka.kafka.header.api_version == 0


def _with_session(step: SaslStep, session: SaslSession, mechanism: str, now_ms: float) -> SaslStep:
    """A successful SaslAuthenticate step with the session's lifetime in its response, or a
    refusal instead (another principal on re-authentication)."""
    assert step.principal is not None
    completion = session.authenticated(step.principal, mechanism, now_ms)
    if completion.refusal is not None:
        failed = SaslAuthenticateResponse(
            ErrorCode.SASL_AUTHENTICATION_FAILED, completion.refusal, b""
        )
        return SaslStep(failed, close=True)
    assert isinstance(step.response, SaslAuthenticateResponse)
    response = dataclasses.replace(
        step.response, session_lifetime_ms=completion.session_lifetime_ms
    )
    return dataclasses.replace(step, response=response)
