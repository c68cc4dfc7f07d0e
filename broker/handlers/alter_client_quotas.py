"""AlterClientQuotas (KIP-546): set or remove producer_byte_rate, consumer_byte_rate and
request_percentage of users, client-ids and (user, client-id) pairs, stored as Kafka stores
them (`/config/users/...`, `/config/clients/...`, each rewritten by compare-and-set with a
change notification), so every broker's quotas follow within seconds. ALTER_CONFIGS on the
cluster, as Kafka."""

from __future__ import annotations

import math

from broker.context import BrokerContext
from broker.core.client_quotas import QUOTA_CONFIG_KEYS, QuotaType
from broker.quota_entities import stored_entity
from controller import zk_data
from controller.zk_configs import ConfigChangedError, get_entity_config, set_entity_config
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntryData,
    EntryResult,
    OpData,
)

__all__ = ["handle_alter_client_quotas"]

_ATTEMPTS = 5


async def handle_alter_client_quotas(
    ctx: BrokerContext, header: RequestHeader, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        denied = ctx.denied(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
        return _all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    if ctx.zk.absent:
        return _all(request, ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session")
    results = []
    for entry in request.entries:
        code, message = await _alter(ctx, entry, request.validate_only)
        results.append(EntryResult(code, message, entry.entity))
    return AlterClientQuotasResponse(tuple(results))


async def _alter(
    ctx: BrokerContext, entry: EntryData, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    stored = stored_entity(entry.entity)
    if isinstance(stored, str):
        return ErrorCode.INVALID_REQUEST, stored
    problem = _check_ops(entry.ops)
    if problem is not None:
        return ErrorCode.INVALID_REQUEST, problem
    if validate_only:
        return ErrorCode.NONE, None
    entity_type, name = stored
    for _ in range(_ATTEMPTS):
        try:
            current = await ctx.zk.run(get_entity_config(entity_type, name))
        except zk_data.ZkDataError as exc:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"stored configs unreadable: {exc}"
        config = dict(current.config)  # a user's SCRAM credentials stay as they are
        for op in entry.ops:
            if op.remove:
                config.pop(op.key, None)
            else:
                config[op.key] = _stored_value(op)
        if config == current.config and current.version >= 0:
            return ErrorCode.NONE, None
        try:
            await ctx.zk.run(set_entity_config(entity_type, name, config, current.version))
        except ConfigChangedError:
            continue
        return ErrorCode.NONE, None
    return ErrorCode.UNKNOWN_SERVER_ERROR, "the entity's configs kept changing; try again"


def _check_ops(ops: tuple[OpData, ...]) -> str | None:
    """Kafka's checks: a known key, once; a positive value, whole for a byte rate."""
    seen: set[str] = set()
    for op in ops:
        if op.key not in QUOTA_CONFIG_KEYS:
            return f"unknown quota key {op.key!r}"
        if op.key in seen:
            return f"{op.key} given twice"
        seen.add(op.key)
        if op.remove:
            continue
        if not 0 < op.value < math.inf:  # NaN too
            return f"{op.key} must be a positive number, not {op.value}"
        if op.key != QuotaType.REQUEST and not float(op.value).is_integer():
            return f"{op.key} is a whole number of bytes per second, not {op.value}"
    return None


def _stored_value(op: OpData) -> str:
    """As Kafka writes it: a byte rate as a long, request_percentage as a double."""
    if op.key == QuotaType.REQUEST:
        return repr(float(op.value))
    return str(int(op.value))


def _all(
    request: AlterClientQuotasRequest, code: ErrorCode, message: str | None
) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(
        tuple(EntryResult(code, message, entry.entity) for entry in request.entries)
    )
