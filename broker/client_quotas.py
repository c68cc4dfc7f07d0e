"""Client quota enforcement (Kafka's QuotaManagers): what each request is charged, and the
throttle time its response carries.

After its handler, a client's Produce is charged the bytes of its records against
producer_byte_rate, a consumer's Fetch the bytes of the records it returns against
consumer_byte_rate, and every request its handler time against request_percentage (KIP-124);
the response says the largest throttle time earned (`throttle_time_ms`) and goes out at once,
then the server reads nothing more from that connection for that long (KIP-219: the broker
mutes the channel, the client backs off). Follower fetches and the requests of the
control-plane listener are exempt, as Kafka's replication is throttled by its own quotas.
The decisions are broker.core.client_quotas; the stored quotas come from config/change_listener.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from broker.core.client_quotas import (
    ClientQuotaManager,
    QuotaEntity,
    QuotaType,
    parse_quota_configs,
)
from broker.core.principal import Principal
from controller.zk_configs import CLIENTS, CLIENTS_OF_USER, USERS, desanitize_entity_name
from protocol.apis import ApiKey
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.produce import ProduceRequest

__all__ = [
    "EXEMPT_API_KEYS",
    "ClientQuotas",
    "quota_entity_of",
    "stored_quotas",
    "with_throttle_time",
]

# The controller's requests to brokers: never throttled (Kafka exempts inter-broker requests).
EXEMPT_API_KEYS = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
    }
)


class ClientQuotas:
    def __init__(self, window_ms: int, window_count: int) -> None:
        self.managers = {
            quota_type: ClientQuotaManager(quota_type, window_ms, window_count)
            for quota_type in QuotaType
        }
        self.enabled = False  # some quota is set: without one, a request costs one test

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        for manager in self.managers.values():
            manager.update_quotas(quotas)
        self.enabled = any(manager.enabled for manager in self.managers.values())

    def charge(
        self,
        principal: Principal,
        client_id: str | None,
        api_key: int,
        request: Any,
        response: Any,
        handler_s: float,
        now_ms: int,
    ) -> int:
        """Record the request against the client's quotas; the throttle time it earned."""
        if not self.enabled or api_key in EXEMPT_API_KEYS:
            return 0
        user, client = principal.name, client_id or ""
        throttle_ms = 0
        if api_key == ApiKey.PRODUCE and isinstance(request, ProduceRequest):
            produced = sum(len(p.records) for t in request.topic_data for p in t.partition_data)
            throttle_ms = self.managers[QuotaType.PRODUCE].record(user, client, produced, now_ms)
        elif api_key == ApiKey.FETCH and isinstance(response, FetchResponse):
            if isinstance(request, FetchRequest) and request.replica_id >= 0:
                return 0  # a follower: replication has its own quotas
            fetched = sum(len(p.records) for t in response.responses for p in t.partitions)
            throttle_ms = self.managers[QuotaType.FETCH].record(user, client, fetched, now_ms)
        # request_percentage: one handler busy for a whole second is 100 (Kafka counts the
        # time of its request handler threads).
        request_ms = self.managers[QuotaType.REQUEST].record(user, client, handler_s * 100, now_ms)
        return max(throttle_ms, request_ms)


def with_throttle_time(response: Any, throttle_ms: int) -> Any:
    """The response with `throttle_time_ms` set, if its API carries one."""
    if throttle_ms <= 0 or not hasattr(response, "throttle_time_ms"):
        return response
    return dataclasses.replace(response, throttle_time_ms=throttle_ms)


def quota_entity_of(entity_type: str, stored_name: str) -> QuotaEntity | None:
    """The quota entity of a stored config entity (USERS `alice`, USERS
    `alice/clients/app`, CLIENTS `app`); None for any other."""
    if entity_type == CLIENTS:
        return QuotaEntity(None, desanitize_entity_name(stored_name))
    if entity_type != USERS:
        return None
    user, nested, client = stored_name.partition(CLIENTS_OF_USER)
    return QuotaEntity(
        desanitize_entity_name(user), desanitize_entity_name(client) if nested else None
    )


def stored_quotas(
    stored: Mapping[tuple[str, str], Mapping[str, str]],
) -> tuple[dict[QuotaEntity, dict[str, float]], dict[str, dict[str, str]]]:
    """The quotas among stored entity configs, and the unreadable values by entity path."""
    quotas: dict[QuotaEntity, dict[str, float]] = {}
    problems: dict[str, dict[str, str]] = {}
    for (entity_type, name), config in stored.items():
        entity = quota_entity_of(entity_type, name)
        if entity is None:
            continue
        values, bad = parse_quota_configs(config)
        if values:
            quotas[entity] = values
        if bad:
            problems[f"{entity_type}/{name}"] = bad
    return quotas, problems
