"""How a client (or a broker towards other brokers) secures its connections: Kafka's client
settings `security.protocol`, `sasl.*` and `ssl.*`, and the SASL exchange after connecting.

`ClientSecurity.from_properties` reads Kafka's property names (the CLI's --command-config file,
the Spark options without their `kafka.` prefix); `authenticate` runs SaslHandshake and
SaslAuthenticate on a fresh connection (SCRAM through `scramp`, verifying the broker's final
signature too; PLAIN only over TLS). A broker with `connections.max.reauth.ms` answers with the
session's lifetime: the connections run the same exchange again before it ends (KIP-368), at
a random 85-95% of it as Kafka's clients (`reauthentication_delay_s`). TLS is 1.2 or later,
with the host name checked unless `ssl.endpoint.identification.algorithm` is empty.
"""

from __future__ import annotations

import math
import random
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from protocol.errors import ErrorCode
from protocol.jaas import JaasLogin, parse_jaas_login

if TYPE_CHECKING:
    import ssl

    from client.network import BrokerConnection
    from protocol.messages.sasl_authenticate import SaslAuthenticateResponse
    from protocol.messages.sasl_handshake import SaslHandshakeResponse

__all__ = [
    "MECHANISMS",
    "PLAINTEXT_CLOSED_HINT",
    "PROTOCOLS",
    "SECURITY_PROPERTIES",
    "AuthenticationError",
    "ClientSecurity",
    "JaasLogin",
    "SecurityConfigError",
    "parse_jaas_login",
    "reauthentication_delay_s",
    "security_from",
]

# A TLS listener closes a plaintext connection at its first bytes, a SASL listener at its
# first request that is not SaslHandshake or ApiVersions: said when that happens.
PLAINTEXT_CLOSED_HINT: Final = (
    " before answering (a TLS or SASL listener? the client's security.protocol, sasl.* and ssl.*"
    " settings say how to connect to one)"
)
PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
# The property names from_properties reads (Kafka's client configs; ssl.cafile and
# sasl.username/password as shorthands for ssl.truststore.location and sasl.jaas.config).
SECURITY_PROPERTIES: Final = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.cafile",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.certfile",
    "ssl.keyfile",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)


class SecurityConfigError(ValueError):
    """A security setting is missing, unknown or malformed; the message names it."""


class AuthenticationError(Exception):
    """The broker refused this client's credentials (SASL_AUTHENTICATION_FAILED) or its
    mechanism (UNSUPPORTED_SASL_MECHANISM); not worth retrying unchanged."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None  # None: the system's CA certificates
    ssl_certfile: str | None = None  # a client certificate (mutual TLS), PEM
    ssl_keyfile: str | None = None  # its key, if not in ssl_certfile
    ssl_key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    _context: list[ssl.SSLContext] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SecurityConfigError(
                f"security.protocol {self.protocol!r}: expected one of {', '.join(PROTOCOLS)}"
            )
        if self.uses_sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise SecurityConfigError(
                    f"sasl.mechanism {self.sasl_mechanism!r}: expected one of "
                    f"{', '.join(MECHANISMS)}"
                )
            if not self.username or self.password is None:
                raise SecurityConfigError(
                    f"security.protocol {self.protocol} needs a username and password "
                    "(sasl.jaas.config, or sasl.username and sasl.password)"
                )
            if self.sasl_mechanism == "PLAIN" and not self.uses_tls:
                raise SecurityConfigError(
                    "sasl.mechanism PLAIN sends the password as it is: only with SASL_SSL"
                )

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context (made once): TLS 1.2+, the CA file or the system's CAs, a client
        certificate if given, host names checked unless turned off."""
        if not self._context:
            import ssl  # here: a PLAINTEXT client (a Spark query's source runner) never needs it

            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.check_hostname = self.check_hostname
            if self.ssl_certfile:
                context.load_cert_chain(
                    self.ssl_certfile, self.ssl_keyfile, password=self.ssl_key_password
                )
            self._context.append(context)
        return self._context[0]

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ClientSecurity:
        """From Kafka's client property names; unknown names are not looked at (the caller
        decides what else a file may hold)."""
        get = properties.get
        username, password = get("sasl.username"), get("sasl.password")
        jaas = get("sasl.jaas.config")
        if jaas:
            try:
                login = parse_jaas_login(jaas)
            except ValueError as exc:
                raise SecurityConfigError(f"sasl.jaas.config: {exc}") from None
            username, password = login.username, login.password
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            if get(key, "PEM").upper() != "PEM":
                raise SecurityConfigError(f"{key} {get(key)!r}: only PEM files are read")
        algorithm = get("ssl.endpoint.identification.algorithm", "https")
        if algorithm not in ("https", ""):
            raise SecurityConfigError(
                f"ssl.endpoint.identification.algorithm {algorithm!r}: expected https or empty"
            )
        security = cls(
            protocol=get("security.protocol", "PLAINTEXT").upper(),
            sasl_mechanism=get("sasl.mechanism", "SCRAM-SHA-512").upper(),
            username=username,
            password=password,
            ssl_cafile=get("ssl.truststore.location") or get("ssl.cafile") or None,
            ssl_certfile=get("ssl.keystore.location") or get("ssl.certfile") or None,
            ssl_keyfile=get("ssl.keyfile") or None,
            ssl_key_password=get("ssl.key.password") or None,
            check_hostname=algorithm == "https",
        )
        for path in (security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile):
            if path is not None and not Path(path).is_file():
                raise SecurityConfigError(f"no such file: {path}")
        return security

    def sasl_exchange(self) -> Generator[object, Any, int]:
        """The SASL requests in turn (SaslHandshake, then SaslAuthenticate until done), each
        sent with the response to the one before; returns the session's lifetime in ms (0:
        unlimited). Sans-IO: the trio connection (`authenticate`) and the Spark driver's
        blocking one drive it. AuthenticationError if the broker refuses."""
        # Imported here, as scramp below: only SASL clients need these message classes.
        from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
        from protocol.messages.sasl_handshake import SaslHandshakeRequest

        assert self.username is not None and self.password is not None
        handshake: SaslHandshakeResponse = yield SaslHandshakeRequest(self.sasl_mechanism)
        if handshake.error_code != ErrorCode.NONE:
            code = ErrorCode(handshake.error_code)
            offered = ", ".join(handshake.mechanisms) or "none"
            raise AuthenticationError(
                code, f"the broker does not offer {self.sasl_mechanism} (it offers: {offered})"
            )
        if self.sasl_mechanism == "PLAIN":
            message = b"\0" + self.username.encode() + b"\0" + self.password.encode()
            done: SaslAuthenticateResponse = yield SaslAuthenticateRequest(message)
            _accepted(done)
            return done.session_lifetime_ms
        # Imported here: scramp (and the importlib.metadata it loads) is about 20 ms of every
        # client's start, a Spark query's source runner included, and only SCRAM needs it.
        from scramp import ScramClient, ScramException

        try:
            scram = ScramClient([self.sasl_mechanism], self.username, self.password)
            first = SaslAuthenticateRequest(scram.get_client_first().encode())
            scram.set_server_first(_accepted((yield first)).decode())
            final = SaslAuthenticateRequest(scram.get_client_final().encode())
            done = yield final
            scram.set_server_final(_accepted(done).decode())
        except (ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, f"the broker's SCRAM answer: {exc}"
            ) from None
        return done.session_lifetime_ms

    async def authenticate(self, connection: BrokerConnection, timeout_ms: int) -> int:
        """The SASL exchange on a fresh connection; the session's lifetime in ms (0:
        unlimited). AuthenticationError if refused."""
        exchange = self.sasl_exchange()
        request = next(exchange)
        while True:
            response = await connection.request(request, timeout_ms=timeout_ms)
            try:
                request = exchange.send(response)
            except StopIteration as done:
                return int(done.value)


def reauthentication_delay_s(session_lifetime_ms: int) -> float:
    """When to re-authenticate, in seconds after authenticating (inf: never): at a random
    85-95% of the session's lifetime, as Kafka's SaslClientAuthenticator (KIP-368), so the
    connections of many clients do not all re-authenticate at once."""
    if session_lifetime_ms <= 0:
        return math.inf
    return session_lifetime_ms * random.uniform(0.85, 0.95) / 1000


def _accepted(response: SaslAuthenticateResponse) -> bytes:
    if response.error_code != ErrorCode.NONE:
        code = ErrorCode(response.error_code)
        raise AuthenticationError(code, response.error_message or "authentication failed")
    return response.auth_bytes


def security_from(value: Any) -> ClientSecurity | None:
    """`security` as the clients accept it: a ClientSecurity, a mapping of Kafka's property
    names, or None (PLAINTEXT)."""
    if value is None or isinstance(value, ClientSecurity):
        return value
    if isinstance(value, Mapping):
        return ClientSecurity.from_properties(value)
    raise TypeError(f"security: expected ClientSecurity or a mapping, not {type(value).__name__}")
