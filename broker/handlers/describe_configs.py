"""DescribeConfigs: each config of a topic or of this broker, its value and its source.

A topic's configs are its overrides (`/config/topics/<t>`) over this broker's settings: the
cluster-wide dynamic defaults (`/config/brokers/<default>`), server.properties, the built-in
defaults (broker/config/config_admin.py). Both znodes are read at each request, so a describe right
after an alter shows it, whichever broker answers. The BROKER resource "" lists the dynamic
defaults that are set; a broker id must be this broker's (as in Kafka, ask that broker).
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.config.config_admin import describe_broker, describe_broker_defaults, describe_topic
from broker.context import BrokerContext
from broker.handlers.create_topics import validate_topic_name
from controller import zk_data
from controller.zk_configs import BROKERS, TOPICS, get_entity_config
from controller.zk_script import exists
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.common import ConfigResourceType
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

__all__ = ["handle_describe_configs"]


async def handle_describe_configs(
    ctx: BrokerContext, header: RequestHeader, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        try:
            code, message, configs = await _describe_one(ctx, resource)
        except zk_data.ZkDataError as exc:
            code, message = ErrorCode.INVALID_CONFIG, f"stored configs unreadable: {exc}"
            configs = []
        wanted = resource.configuration_keys
        results.append(
            DescribeConfigsResult(
                code,
                message,
                resource.resource_type,
                resource.resource_name,
                tuple(
                    _shaped(c, request.include_synonyms, request.include_documentation)
                    for c in configs
                    if wanted is None or c.name in wanted
                ),
            )
        )
    return DescribeConfigsResponse(tuple(results))


async def _describe_one(
    ctx: BrokerContext, resource: DescribeConfigsResource
) -> tuple[ErrorCode, str | None, Sequence[DescribeConfigsResourceResult]]:
    name = resource.resource_name
    if resource.resource_type == ConfigResourceType.TOPIC and not ctx.authorize(
        AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name
    ):
        denied = ctx.denied(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied, []
    if resource.resource_type == ConfigResourceType.BROKER and not ctx.authorize_cluster(
        AclOperation.DESCRIBE_CONFIGS
    ):
        denied = ctx.denied(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied, []
    if ctx.zk.absent:
        return ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session", []
    if resource.resource_type == ConfigResourceType.TOPIC:
        bad_name = validate_topic_name(name)
        if bad_name is not None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, bad_name, []
        if await ctx.zk.run(exists(zk_data.topic_path(name))) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist", []
        overrides = await ctx.zk.run(get_entity_config(TOPICS, name))
        defaults = await ctx.zk.run(get_entity_config(BROKERS, zk_data.DEFAULT_BROKER_ENTITY))
        return ErrorCode.NONE, None, describe_topic(ctx.config, defaults.config, overrides.config)
    if resource.resource_type == ConfigResourceType.BROKER:
        if name and name != str(ctx.broker_id):
            return (
                ErrorCode.INVALID_REQUEST,
                f"broker {ctx.broker_id} describes itself ({ctx.broker_id}) or the cluster-wide "
                f'defaults (""), not {name!r}: ask that broker',
                [],
            )
        defaults = await ctx.zk.run(get_entity_config(BROKERS, zk_data.DEFAULT_BROKER_ENTITY))
        if not name:
            return ErrorCode.NONE, None, describe_broker_defaults(defaults.config)
        return ErrorCode.NONE, None, describe_broker(ctx.config, defaults.config)
    return (
        ErrorCode.INVALID_REQUEST,
        f"resource type {resource.resource_type}: expected TOPIC (2) or BROKER (4)",
        [],
    )


def _shaped(
    config: DescribeConfigsResourceResult, synonyms: bool, documentation: bool
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        config.name,
        config.value,
        config.read_only,
        config.config_source,
        config.is_sensitive,
        config.synonyms if synonyms else (),
        config.config_type,
        config.documentation if documentation else None,
    )
