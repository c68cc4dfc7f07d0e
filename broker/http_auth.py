"""Who asks the metrics listener (`metrics.listener.authentication.method=basic`), and what they
may see: HTTP basic authentication against the SCRAM users (broker/core/http_basic.py), then
the broker's authorizer, as for a request on a Kafka listener.

PBKDF2 costs 5-25 ms per check, so it runs in a worker thread (hashlib releases the GIL), at
most `PASSWORD_CHECK_THREADS` at a time: a flood of logins queues there instead of stalling
the event loop that serves the Kafka listeners. One thread leaves the loop a core of its own
on a two-core machine (with two, a flood of 16384-iteration guesses slowed Metadata's 90th
percentile almost tenfold; with one, two- to threefold); a page polling once a second needs
one check a second.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Final

import trio

from broker.context import SESSION, Session
from broker.core.http_basic import basic_credentials, login_matches
from broker.core.principal import USER_TYPE, Principal
from broker.core.scram import SCRAM_MECHANISMS, ScramCredential
from protocol.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["METRICS_LISTENER_NAME", "PASSWORD_CHECK_THREADS", "HttpAccess"]

PASSWORD_CHECK_THREADS: Final = 1
METRICS_LISTENER_NAME: Final = "METRICS"  # the Session's listener, in logs of denials

_log = logging.getLogger("highwater.http")


class HttpAccess:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._limiter = trio.CapacityLimiter(PASSWORD_CHECK_THREADS)
        # Salts the made-up credentials of unknown users (as the SASL authenticator's).
        self._fake_salt_key = secrets.token_bytes(32)

    async def authenticate(self, authorization: str | None, host: str) -> Principal | None:
        """The principal of a request's Authorization header; None: no or wrong credentials."""
        given = basic_credentials(authorization)
        if given is None:
            return None
        user, password = given
        # Read on the event loop: the thread sees a fixed copy, never the live dict.
        stored: dict[str, ScramCredential | None] = {
            m: self._ctx.credentials.get((user, m)) for m in SCRAM_MECHANISMS
        }
        matches = await trio.to_thread.run_sync(
            login_matches,
            user,
            password,
            lambda _user, mechanism: stored[mechanism],
            self._fake_salt_key,
            limiter=self._limiter,
        )
        if not matches:
            # As Kafka's authenticator logs a failed login (the user named, never the password).
            _log.info("metrics listener: authentication failed for user %r from %s", user, host)
            return None
        return Principal(USER_TYPE, user)

    def may(
        self,
        principal: Principal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """The authorizer's answer for `principal` (always yes without an authorizer)."""
        token = SESSION.set(Session(principal, host, METRICS_LISTENER_NAME))
        try:
            return self._ctx.authorize(operation, resource_type, name, log_denied=log_denied)
        finally:
            SESSION.reset(token)
