"""Client quotas (KIP-13, KIP-55, KIP-124): Kafka's ClientQuotaManager and
ClientRequestQuotaManager decisions, with time an input.

A quota is stored for an entity: a user and/or a client-id, either of which may be the
default (`<default>`), as Kafka keeps them under `/config/users/<user>/clients/<client-id>`,
`/config/users/<user>` and `/config/clients/<client-id>`. A request's (user principal,
client-id) takes, for each quota type on its own, the first stored entity in Kafka's order
(`quota_entities`) that sets that type; the entity matched also decides what shares the rate
(Kafka's metric tags): a quota on `/config/users/alice` is shared by every client-id of alice,
one on `/config/clients/<default>` by every user of each client-id.

`record` adds a value to the rate (`SampledRate`, `quota.window.num` windows of
`quota.window.size.seconds`) and, past the quota, answers how long the client must wait so
that the rate falls back to it: `(observed - quota) / quota * window`, at most the whole quota
window (Kafka's QuotaUtils.boundedThrottleTime, KIP-219).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from broker.core.sampled_rate import SampledRate

__all__ = [
    "DEFAULT_ENTITY",
    "DEFAULT_WINDOW_COUNT",
    "DEFAULT_WINDOW_MS",
    "QUOTA_CONFIG_KEYS",
    "ClientQuotaManager",
    "QuotaEntity",
    "QuotaSensorStats",
    "QuotaType",
    "parse_quota_configs",
    "quota_entities",
    "resolve_quota",
]

DEFAULT_ENTITY: Final = "<default>"  # Kafka's ConfigEntityName.Default
DEFAULT_WINDOW_COUNT: Final = 11  # quota.window.num
DEFAULT_WINDOW_MS: Final = 1000  # quota.window.size.seconds


class QuotaType(enum.StrEnum):
    """A quota's config key; `metric_name` is Kafka's QuotaType (the JMX `type`)."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"

    @property
    def metric_name(self) -> str:
        return _METRIC_NAMES[self]


_METRIC_NAMES: Final = {
    QuotaType.PRODUCE: "Produce",
    QuotaType.FETCH: "Fetch",
    QuotaType.REQUEST: "Request",
}
QUOTA_CONFIG_KEYS: Final = frozenset(q.value for q in QuotaType)
_SWEEP_AT_SENSORS: Final = 1024  # past this many measured clients, drop the idle ones


@dataclass(frozen=True, slots=True, order=True)
class QuotaEntity:
    """A stored quota's entity: `user` and `client_id` each a name, DEFAULT_ENTITY, or None
    (not part of the entity: `/config/users/alice` has no client-id)."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client-id, or both")

    @property
    def zk_path(self) -> str:
        """Its znode under /config (Kafka's entity path)."""
        if self.user is None:
            return f"clients/{self.client_id}"
        if self.client_id is None:
            return f"users/{self.user}"
        return f"users/{self.user}/clients/{self.client_id}"

    def __str__(self) -> str:
        return self.zk_path


def quota_entities(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """The stored entities that may set a quota for (user, client_id), most specific first
    (Kafka's DefaultQuotaCallback order)."""
    d = DEFAULT_ENTITY
    return (
        QuotaEntity(user, client_id),
        QuotaEntity(user, d),
        QuotaEntity(user, None),
        QuotaEntity(d, client_id),
        QuotaEntity(d, d),
        QuotaEntity(d, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, d),
    )


def resolve_quota(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    quota_type: QuotaType,
    user: str,
    client_id: str,
) -> tuple[tuple[str, str], float | None]:
    """The quota for (user, client_id) of `quota_type` and the (user, client-id) tags of the
    rate it is measured on ("" where the matched entity has no such part); None: no quota,
    measured per (user, client-id)."""
    for entity in quota_entities(user, client_id):
        configs = quotas.get(entity)
        if configs is not None and quota_type.value in configs:
            tags = (
                user if entity.user is not None else "",
                client_id if entity.client_id is not None else "",
            )
            return tags, configs[quota_type.value]
    return (user, client_id), None


def parse_quota_configs(stored: Mapping[str, str]) -> tuple[dict[str, float], dict[str, str]]:
    """The quota keys of a stored entity config as numbers (others, such as SCRAM credentials
    in the same user znode, ignored), and the unreadable ones with why."""
    quotas: dict[str, float] = {}
    problems: dict[str, str] = {}
    for key, raw in stored.items():
        if key not in QUOTA_CONFIG_KEYS:
            continue
        try:
            value = float(raw)
        except ValueError:
            problems[key] = f"{raw!r} is not a number"
            continue
        if not 0 < value < math.inf:  # NaN too
            problems[key] = f"{raw!r} must be a positive number"
            continue
        quotas[key] = value
    return quotas, problems


@dataclass(slots=True)
class QuotaSensorStats:
    """What the metrics show of one measured (user, client-id)."""

    quota: float | None
    rate: SampledRate
    throttled: int = 0  # requests throttled
    throttle_time_ms_total: int = 0
    last_throttle_time_ms: int = 0


@dataclass(slots=True)
class ClientQuotaManager:
    """One quota type's rates and decisions for every client of this broker."""

    quota_type: QuotaType
    window_ms: int = DEFAULT_WINDOW_MS
    window_count: int = DEFAULT_WINDOW_COUNT
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    _sensors: dict[tuple[str, str], QuotaSensorStats] = field(default_factory=dict)
    _enabled: bool = False

    def __post_init__(self) -> None:
        self.update_quotas(self.quotas)

    @property
    def max_throttle_time_ms(self) -> int:
        return self.window_ms * self.window_count

    @property
    def enabled(self) -> bool:
        """Some stored entity sets this quota type (else nothing is measured, as Kafka)."""
        return self._enabled

    def update_quotas(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Every stored quota (all types); rates already measured keep going, against the
        quota now in force."""
        self.quotas = quotas
        self._enabled = any(self.quota_type.value in c for c in quotas.values())

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Add `value` (bytes; percent-seconds for request_percentage) for the client; the
        throttle time in ms it earned (0: within its quota, or no quota)."""
        if not self.enabled:
            return 0
        tags, quota = resolve_quota(self.quotas, self.quota_type, user, client_id)
        if quota is None:
            return 0
        sensor = self._sensors.get(tags)
        if sensor is None and len(self._sensors) >= _SWEEP_AT_SENSORS:
            self._forget_idle(now_ms)
        if sensor is None or sensor.quota != quota:
            sensor = QuotaSensorStats(quota, SampledRate(self.window_ms, self.window_count))
            self._sensors[tags] = sensor
        sensor.rate.record(value, now_ms)
        observed = sensor.rate.rate_per_sec(now_ms)
        if observed <= quota:
            sensor.last_throttle_time_ms = 0
            return 0
        window_ms = sensor.rate.window_size_ms(now_ms)
        throttle_ms = min(round((observed - quota) / quota * window_ms), self.max_throttle_time_ms)
        sensor.throttled += 1
        sensor.throttle_time_ms_total += throttle_ms
        sensor.last_throttle_time_ms = throttle_ms
        return throttle_ms

    def sensors(self, now_ms: int) -> Iterator[tuple[tuple[str, str], QuotaSensorStats]]:
        """The measured (user, client-id) tags and their stats; those idle for the whole quota
        window are forgotten first (Kafka expires inactive quota sensors)."""
        self._forget_idle(now_ms)
        yield from self._sensors.items()

    def _forget_idle(self, now_ms: int) -> None:
        for tags in [t for t, s in self._sensors.items() if s.rate.idle(now_ms)]:
            del self._sensors[tags]
