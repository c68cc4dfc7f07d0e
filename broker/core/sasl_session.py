"""An authenticated SASL connection's session: its lifetime and re-authentication (KIP-368,
Kafka's SaslServerAuthenticator with its ReauthInfo, and SocketServer's expired-channel
check). Pure: times are given, in milliseconds of a monotonic clock.

With `connections.max.reauth.ms` > 0 (or the listener's override for the mechanism used,
`listener.name.<name>.<mechanism>.connections.max.reauth.ms`) a successful SaslAuthenticate
tells the client its `session_lifetime_ms` (that setting: no SCRAM credential here has a
lifetime of its own), and the session ends that long after. SaslHandshake on an
authenticated connection begins a re-authentication, at any time, even after the session
ended; it must end as the same principal ("cannot change principals during
re-authentication", as Kafka) and starts a new session. Any other request after the end
closes the connection. 0 (the default) is Kafka's: sessions never end and only new
connections authenticate.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from broker.core.principal import USER_TYPE, Principal
from broker.core.scram import ScramCredential
from protocol.apis import ApiKey

__all__ = ["Admission", "Completion", "SaslSession", "revoked_users"]


class Admission(enum.Enum):
    SERVE = "serve"
    REAUTHENTICATE = "reauthenticate"  # a SaslHandshake: run the SASL exchange again
    EXPIRED = "expired"  # close the connection


@dataclass(frozen=True, slots=True)
class Completion:
    """A finished (re-)authentication: the lifetime to tell the client (0: unlimited), or
    why the connection must close instead."""

    session_lifetime_ms: int = 0
    refusal: str | None = None


class SaslSession:
    def __init__(self, max_reauth_ms: int, by_mechanism: Mapping[str, int] | None = None) -> None:
        """`max_reauth_ms`: connections.max.reauth.ms (0: sessions never end);
        `by_mechanism`: the listener's overrides of it, by SASL mechanism."""
        self.max_reauth_ms = max_reauth_ms
        self.by_mechanism = dict(by_mechanism or {})
        self.principal: Principal | None = None
        self.expires_at_ms = math.inf
        self.reauthentications = 0

    def authenticated(self, principal: Principal, mechanism: str, now_ms: float) -> Completion:
        """The SASL exchange with `mechanism` succeeded as `principal` (the first time, or
        again)."""
        if self.principal is not None:
            if principal != self.principal:
                return Completion(
                    refusal=(
                        "Cannot change principals during re-authentication from "
                        f"{self.principal}: {principal}"
                    )
                )
            self.reauthentications += 1
        self.principal = principal
        lifetime_ms = self.by_mechanism.get(mechanism, self.max_reauth_ms)
        if lifetime_ms <= 0:
            self.expires_at_ms = math.inf
            return Completion()
        self.expires_at_ms = now_ms + lifetime_ms
        return Completion(lifetime_ms)

    def admit(self, api_key: int, now_ms: float) -> Admission:
        """What to do with a request on the authenticated connection. SaslHandshake comes
        first, as in Kafka's Processor: an expired session may still re-authenticate."""
        if api_key == ApiKey.SASL_HANDSHAKE:
            return Admission.REAUTHENTICATE
        if now_ms > self.expires_at_ms:
            return Admission.EXPIRED
        return Admission.SERVE

    def user(self) -> str | None:
        """The authenticated user's name (None before authentication)."""
        if self.principal is None or self.principal.type != USER_TYPE:
            return None
        return self.principal.name


def revoked_users(
    before: Mapping[tuple[str, str], ScramCredential],
    after: Mapping[tuple[str, str], ScramCredential],
) -> frozenset[str]:
    """The users one of whose SCRAM credentials was deleted or changed (a new password): their
    open connections authenticated with what no longer lets them in. A credential added for
    another mechanism revokes nothing (the broker's own start-up adds missing ones)."""
    return frozenset(
        user for (user, mechanism), credential in before.items()
        if after.get((user, mechanism)) != credential
    )  # fmt: skip
