"""DescribeClientQuotas (KIP-546): the stored client quotas whose entity matches the filter,
read from ZooKeeper (the source of truth every broker follows). DESCRIBE_CONFIGS on the
cluster, as Kafka."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.client_quotas import parse_quota_configs
from broker.quota_entities import CLIENT_ID, USER, api_entity, matches
from controller.zk_configs import read_quota_entities
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntryData,
    MatchType,
    ValueData,
)

__all__ = ["handle_describe_client_quotas"]


async def handle_describe_client_quotas(
    ctx: BrokerContext, header: RequestHeader, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        denied = ctx.denied(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        return DescribeClientQuotasResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied, None)
    problem = _check_filter(request)
    if problem is not None:
        return DescribeClientQuotasResponse(ErrorCode.INVALID_REQUEST, problem, None)
    if ctx.zk.absent:
        return DescribeClientQuotasResponse(ErrorCode.NOT_CONTROLLER, "no ZooKeeper", None)
    entries = []
    for (entity_type, name), config in sorted((await ctx.zk.run(read_quota_entities())).items()):
        values, _ = parse_quota_configs(config)
        if not values:
            continue  # a user with credentials only, or a parent znode
        entity = api_entity(entity_type, name)
        if matches(entity, request.components, request.strict):
            entries.append(
                EntryData(entity, tuple(ValueData(k, v) for k, v in sorted(values.items())))
            )
    return DescribeClientQuotasResponse(ErrorCode.NONE, None, tuple(entries))


def _check_filter(request: DescribeClientQuotasRequest) -> str | None:
    seen: set[str] = set()
    for component in request.components:
        if component.entity_type not in (USER, CLIENT_ID):
            return f"unsupported quota entity type {component.entity_type!r}"
        if component.entity_type in seen:
            return f"entity type {component.entity_type!r} given twice"
        seen.add(component.entity_type)
        if component.match_type not in tuple(MatchType):
            return f"unknown match type {component.match_type}"
        if (component.match_type == MatchType.EXACT) != (component.match is not None):
            return "a name is given with an EXACT match, and only then"
    return None
