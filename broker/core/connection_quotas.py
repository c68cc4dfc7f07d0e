"""How many connections the broker takes, from whom, and how fast (Kafka's ConnectionQuotas).
Pure: the server (broker/server.py) asks it at each accept and tells it of each close.

- `max.connections`: every listener's connections together. When the broker has more than one
  listener, the inter-broker listener is never refused by it (KIP-402), so clients cannot
  crowd out replication and the controller; its connections still count.
- `listener.name.<name>.max.connections`: one listener's connections, that one's included.
- `max.connections.per.ip`, `max.connections.per.ip.overrides`: one client address's
  connections over every listener but that protected inter-broker one. (Kafka counts the
  inter-broker listener too; brokers on one host share its address, and that listener's own
  limit bounds it.)
- `max.connection.creation.rate` (KIP-612): connections accepted per second over every
  listener but that protected one, as a token bucket holding one second's worth. Past it the
  listener waits before it accepts the next connection (`accept_delay_s`), as Kafka's
  acceptor does, the connection waiting in the kernel's backlog meanwhile.

A connection refused by a count is closed at once (Kafka's acceptor waits for a free slot
under max.connections instead; Highwater has always closed).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from broker.config.config_def import INT_MAX

__all__ = ["ConnectionLimits", "ConnectionQuotas", "Refusal"]


class Refusal(enum.Enum):
    """Why a connection was closed as it was accepted (the metrics' `reason` label)."""

    MAX_CONNECTIONS = "max_connections"
    LISTENER_MAX_CONNECTIONS = "listener_max_connections"
    MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = INT_MAX
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)  # by name
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # by IP
    max_connection_creation_rate: int = INT_MAX  # per second
    inter_broker_listener: str | None = None


class ConnectionQuotas:
    def __init__(self, limits: ConnectionLimits, listeners: Collection[str]) -> None:
        self.limits = limits
        # KIP-402: with a single listener, clients and brokers share it and nothing is exempt.
        self.protected = (
            limits.inter_broker_listener
            if len(listeners) > 1 and limits.inter_broker_listener in listeners
            else None
        )
        self.total = 0
        self._by_listener: Counter[str] = Counter()
        self._by_host: Counter[str] = Counter()
        rate = limits.max_connection_creation_rate
        self._tokens = float(rate)
        self._tokens_at: float | None = None

    def connections_of(self, host: str) -> int:
        return self._by_host[host]

    def admit(self, listener: str, host: str) -> Refusal | None:
        """Count a connection just accepted on `listener` from `host`, or say why it must be
        closed (and then count nothing)."""
        limits = self.limits
        listener_limit = limits.listener_max_connections.get(listener, INT_MAX)
        if self._by_listener[listener] >= listener_limit:
            return Refusal.LISTENER_MAX_CONNECTIONS
        protected = listener == self.protected
        if not protected:
            if self.total >= limits.max_connections:
                return Refusal.MAX_CONNECTIONS
            host_limit = limits.max_connections_per_ip_overrides.get(
                host, limits.max_connections_per_ip
            )
            if self._by_host[host] >= host_limit:
                return Refusal.MAX_CONNECTIONS_PER_IP
            self._by_host[host] += 1
        self._by_listener[listener] += 1
        self.total += 1
        return None

    def release(self, listener: str, host: str) -> None:
        """A connection `admit` counted has closed."""
        self.total -= 1
        self._by_listener[listener] -= 1
        if listener != self.protected:
            self._by_host[host] -= 1
            if not self._by_host[host]:
                del self._by_host[host]  # no entry kept per address ever seen

    def accept_delay_s(self, listener: str, now: float) -> float:
        """How long `listener` should wait before it accepts its next connection (0: now)."""
        rate = self.limits.max_connection_creation_rate
        if listener == self.protected or rate >= INT_MAX:
            return 0.0
        self._refill(now)
        # Within a rounding error of a whole token is one (else a float's last bit could
        # ask for a wait too short for the clock to move).
        return 0.0 if self._tokens >= 1 - 1e-9 else (1 - self._tokens) / rate

    def accepted(self, listener: str, now: float) -> None:
        """`listener` accepted a connection at `now` (refused or not, it was created)."""
        if listener == self.protected or self.limits.max_connection_creation_rate >= INT_MAX:
            return
        self._refill(now)
        self._tokens -= 1

    def _refill(self, now: float) -> None:
        rate = self.limits.max_connection_creation_rate
        if self._tokens_at is not None:
            self._tokens = min(float(rate), self._tokens + (now - self._tokens_at) * rate)
        self._tokens_at = now
