"""A SASL listener's authentication of one connection (Kafka's SaslServerAuthenticator). Pure.

Before a connection has authenticated it may send only ApiVersions and SaslHandshake, then
SaslAuthenticate steps, in that order; anything else, or a step out of order, ends it
(ILLEGAL_SASL_STATE). SCRAM-SHA-256/512 run through `scramp` (RFC 5802: two steps); PLAIN
(one step, TLS listeners only) is checked against the user's SCRAM credential. An unknown user
is run through the SCRAM exchange with a made-up credential, so a wrong user and a wrong
password fail alike, at the same step (RFC 5802 section 5.1). A failure answers
SASL_AUTHENTICATION_FAILED and the connection is closed.

Re-authentication (KIP-368; broker.core.sasl_session decides when) runs the same exchange
again on the open connection, with the mechanism it first used (another one is refused with
UNSUPPORTED_SASL_MECHANISM, as Kafka's SaslServerAuthenticator).

PLAIN's check hashes the password (PBKDF2, 4096 iterations or more: milliseconds of CPU), too
slow for the event loop: `authenticate` hands it back as a `PasswordCheck` for the caller to
run elsewhere (a thread), then `password_checked` gives the step. SCRAM's server side only
computes HMACs and hashes of stored keys, and is answered at once.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from scramp import ScramException, ScramMechanism
from scramp.core import Nonce, ScramServer

from broker.core.principal import USER_TYPE, Principal
from broker.core.scram import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    password_matches,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["CredentialLookup", "PasswordCheck", "SaslAuthenticator", "SaslStage", "SaslStep"]

# (username, SCRAM mechanism) -> the stored credential, None if there is none.
CredentialLookup = Callable[[str, str], ScramCredential | None]

PLAIN: Final = "PLAIN"
_FAILED: Final = "Authentication failed: invalid credentials with SASL mechanism {}"


class SaslStage(enum.Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate steps
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslStep:
    """The answer to send; then close the connection if `close`; `principal` once done."""

    response: SaslHandshakeResponse | SaslAuthenticateResponse
    close: bool = False
    principal: Principal | None = None


@dataclass(frozen=True, slots=True)
class PasswordCheck:
    """A password to check against a credential: `run` it (it takes milliseconds and holds no
    state of the authenticator, so a thread may), then give the result to
    `SaslAuthenticator.password_checked`."""

    mechanism: str
    credential: ScramCredential
    password: str = field(repr=False)

    def run(self) -> bool:
        return password_matches(self.mechanism, self.credential, self.password)


class SaslAuthenticator:
    def __init__(
        self,
        mechanisms: tuple[str, ...],
        credentials: CredentialLookup,
        *,
        fake_salt_key: bytes,
        server_nonce: str | None = None,
    ) -> None:
        """`mechanisms`: those this listener offers (PLAIN only on TLS listeners: the caller
        decides). `fake_salt_key`: a per-broker secret salting made-up credentials, so an
        unknown user sees the same salt every time, as a real one does."""
        self.mechanisms = mechanisms
        self._credentials = credentials
        self._fake_salt_key = fake_salt_key
        self._server_nonce = server_nonce
        self.stage = SaslStage.HANDSHAKE
        self.mechanism: str | None = None
        self._scram: ScramServer | None = None
        self._user: str | None = None
        self._checking: PasswordCheck | None = None  # a PLAIN password being checked
        self._reauth_mechanism: str | None = None  # re-authenticating: the first mechanism

    def admits(self, api_key: int) -> bool:
        """Whether a request with this api key may come now (else: close the connection)."""
        if self.stage is SaslStage.HANDSHAKE:
            return api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
        if self.stage is SaslStage.AUTHENTICATE:
            return api_key == ApiKey.SASL_AUTHENTICATE
        return self.stage is SaslStage.COMPLETE

    def begin_reauthentication(self) -> None:
        """Expect the exchange again (a SaslHandshake comes next), with the same mechanism."""
        assert self.stage is SaslStage.COMPLETE and self.mechanism is not None
        self._reauth_mechanism = self.mechanism
        self.stage = SaslStage.HANDSHAKE
        self.mechanism = None
        self._scram = None
        self._user = None

    def handshake(self, request: SaslHandshakeRequest) -> SaslStep:
        if self.stage is not SaslStage.HANDSHAKE:
            self.stage = SaslStage.FAILED
            return SaslStep(SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, ()), close=True)
        offered = self.mechanisms if self._reauth_mechanism is None else (self._reauth_mechanism,)
        if request.mechanism not in offered:
            self.stage = SaslStage.FAILED
            response = SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, offered)
            return SaslStep(response, close=True)
        self.mechanism = request.mechanism
        self.stage = SaslStage.AUTHENTICATE
        return SaslStep(SaslHandshakeResponse(ErrorCode.NONE, self.mechanisms))

    def authenticate(self, request: SaslAuthenticateRequest) -> SaslStep | PasswordCheck:
        """The step to answer, or (PLAIN) a password to check first: run it, then
        `password_checked`."""
        if (
            self.stage is not SaslStage.AUTHENTICATE
            or self.mechanism is None
            or self._checking is not None
        ):
            return self._fail(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate out of order")
        if self.mechanism == PLAIN:
            return self._plain(request.auth_bytes)
        return self._scram_step(self.mechanism, request.auth_bytes)

    def password_checked(self, matches: bool) -> SaslStep:
        """The step after the PasswordCheck `authenticate` gave has run."""
        check, self._checking = self._checking, None
        if check is None or self._user is None:
            return self._fail(ErrorCode.ILLEGAL_SASL_STATE, "no password was being checked")
        if matches:
            return self._complete(self._user, b"")
        return self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, _FAILED.format(PLAIN))

    # -- mechanisms --------------------------------------------------------------------------

    def _plain(self, auth_bytes: bytes) -> SaslStep | PasswordCheck:
        # RFC 4616: [authzid] NUL authcid NUL passwd; Kafka allows authzid only = authcid.
        parts = auth_bytes.split(b"\0")
        try:
            if len(parts) != 3:
                raise ValueError("three fields expected")
            authzid, user, password = (p.decode() for p in parts)
        except (UnicodeDecodeError, ValueError):
            return self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, "malformed PLAIN message")
        if not user or (authzid and authzid != user):
            return self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, "malformed PLAIN message")
        self._user = user
        for mechanism in reversed(SCRAM_MECHANISMS):  # the stronger hash first
            credential = self._credentials(user, mechanism)
            if credential is not None:
                self._checking = PasswordCheck(mechanism, credential, password)
                break
        else:
            # An unknown user costs the same hashing as a known one, and fails it.
            mechanism = SCRAM_MECHANISMS[-1]
            self._checking = PasswordCheck(mechanism, self._fake_credential(user), password)
        return self._checking

    def _scram_step(self, mechanism: str, auth_bytes: bytes) -> SaslStep:
        try:
            message = auth_bytes.decode()
            if self._scram is None:
                self._scram = ScramMechanism(mechanism).make_server(
                    self._auth_info(mechanism), s_nonce=self._server_nonce
                )
                self._scram.set_client_first(message)
                return SaslStep(_authenticated(self._scram.get_server_first().encode()))
            _accept_kafkas_nonce(self._scram, message)
            self._scram.set_client_final(message)
            server_final = self._scram.get_server_final().encode()
        except (ScramException, UnicodeDecodeError):
            return self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, _FAILED.format(mechanism))
        assert self._user is not None
        return self._complete(self._user, server_final)

    def _auth_info(self, mechanism: str) -> Callable[[str], tuple[bytes, bytes, bytes, int]]:
        def lookup(sasl_name: str) -> tuple[bytes, bytes, bytes, int]:
            user = sasl_name.replace("=2C", ",").replace("=3D", "=")  # RFC 5802 saslname
            self._user = user
            credential = self._credentials(user, mechanism) or self._fake_credential(user)
            c = credential
            return c.salt, c.stored_key, c.server_key, c.iterations

        return lookup

    def _fake_credential(self, user: str) -> ScramCredential:
        """A credential nobody's password matches: a stable salt, unguessable keys."""
        salt = hmac.new(self._fake_salt_key, user.encode(), hashlib.sha256).digest()[:16]
        return ScramCredential(
            salt, secrets.token_bytes(64), secrets.token_bytes(64), MIN_ITERATIONS
        )

    # -- outcomes ----------------------------------------------------------------------------

    def _complete(self, user: str, auth_bytes: bytes) -> SaslStep:
        self.stage = SaslStage.COMPLETE
        return SaslStep(_authenticated(auth_bytes), principal=Principal(USER_TYPE, user))

    def _fail(self, code: ErrorCode, message: str) -> SaslStep:
        self.stage = SaslStage.FAILED
        return SaslStep(SaslAuthenticateResponse(code, message, b""), close=True)


def _accept_kafkas_nonce(server: ScramServer, client_final: str) -> None:
    """Accept a client-final nonce that ends with the server-first one, as Kafka 3.8.1 and
    3.9's ScramSaslServer do (`nonce().endsWith(...)`), not only one equal to it (scramp's
    check, RFC 5802's): librdkafka before 2.6.1 (Debian's kcat 1.7.1 has 2.0.2) sends its
    client nonce again in front of the server-first nonce. The client's proof is still checked
    over the message as sent, and the nonce still carries this exchange's server nonce."""
    expected = str(server.nonce)
    for attribute in client_final.split(","):
        if attribute.startswith("r="):
            sent = attribute[2:]
            if sent != expected and sent.endswith(expected):
                server.nonce = Nonce(sent)  # ScramException if not printable: refused below
            return


def _authenticated(auth_bytes: bytes) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(ErrorCode.NONE, None, auth_bytes)
