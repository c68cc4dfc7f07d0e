"""IncrementalAlterConfigs: set or delete configs of a topic, or of the cluster-wide broker
defaults, while the cluster runs.

As in Kafka's ZooKeeper mode, the broker that receives the request (any broker) reads the
entity's stored configs, applies the operations, checks the result exactly as topic creation
or server.properties would (broker/config/config_admin.py), and writes it back with a
`/config/changes` notification in one transaction, compare-and-set on the znode's version
(again, a few times, if another writer came first). Every broker, watching the notifications,
applies the change within seconds (broker/config/change_listener.py). Each resource succeeds
or fails whole, with an error naming the key.
"""

from __future__ import annotations

from broker.config.config_admin import (
    AlterConfigError,
    altered_broker_defaults,
    altered_topic_config,
    static_defaults,
)
from broker.context import BrokerContext
from broker.handlers.create_topics import validate_topic_name
from controller import zk_data
from controller.zk_configs import (
    BROKERS,
    TOPICS,
    ConfigChangedError,
    get_entity_config,
    set_entity_config,
)
from controller.zk_script import ZkScript, exists
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.common import ConfigResourceType
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["handle_incremental_alter_configs"]

_WRITE_ATTEMPTS = 5


async def handle_incremental_alter_configs(
    ctx: BrokerContext, header: RequestHeader, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    named = [(r.resource_type, r.resource_name) for r in request.resources]
    results = []
    for resource in request.resources:
        if named.count((resource.resource_type, resource.resource_name)) > 1:
            result = _result(resource, ErrorCode.INVALID_REQUEST, "resource named twice")
        else:
            result = await _alter_one(ctx, resource, request.validate_only)
        results.append(result)
    return IncrementalAlterConfigsResponse(tuple(results))


async def _alter_one(
    ctx: BrokerContext, resource: AlterConfigsResource, validate_only: bool
) -> AlterConfigsResourceResponse:
    if resource.resource_type == ConfigResourceType.TOPIC and not ctx.authorize(
        AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name
    ):
        denied = ctx.denied(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name)
        return _result(resource, ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied)
    if resource.resource_type == ConfigResourceType.BROKER and not ctx.authorize_cluster(
        AclOperation.ALTER_CONFIGS
    ):
        denied = ctx.denied(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
        return _result(resource, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    if ctx.zk.absent:
        return _result(resource, ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session")
    if resource.resource_type == ConfigResourceType.TOPIC:
        entity_type, name = TOPICS, resource.resource_name
        bad_name = validate_topic_name(name)
        if bad_name is not None:  # no such topic can exist; never a path built from it
            return _result(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, bad_name)
        if not await ctx.zk.run(_topic_exists(name)):
            return _result(
                resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            )
    elif resource.resource_type == ConfigResourceType.BROKER:
        if resource.resource_name.isdigit():
            return _result(
                resource,
                ErrorCode.INVALID_REQUEST,
                "per-broker dynamic configs are not supported: alter the cluster-wide default "
                '(resource name "")',
            )
        if resource.resource_name:
            return _result(
                resource,
                ErrorCode.INVALID_REQUEST,
                f'broker resource name {resource.resource_name!r}: expected "" (the '
                "cluster-wide default)",
            )
        entity_type, name = BROKERS, zk_data.DEFAULT_BROKER_ENTITY
    else:
        return _result(
            resource,
            ErrorCode.INVALID_REQUEST,
            f"resource type {resource.resource_type}: expected TOPIC (2) or BROKER (4)",
        )
    for _attempt in range(_WRITE_ATTEMPTS):
        try:
            stored = await ctx.zk.run(get_entity_config(entity_type, name))
        except zk_data.ZkDataError as exc:
            return _result(resource, ErrorCode.INVALID_CONFIG, f"stored configs unreadable: {exc}")
        try:
            if entity_type == TOPICS:
                config = altered_topic_config(stored.config, resource.configs)
            else:
                config = altered_broker_defaults(
                    stored.config, resource.configs, static_defaults(ctx.config)
                )
        except AlterConfigError as exc:
            return _result(resource, exc.code, exc.message)
        if validate_only:
            return _result(resource, ErrorCode.NONE, None)
        try:
            await ctx.zk.run(set_entity_config(entity_type, name, config, stored.version))
        except ConfigChangedError:
            continue
        return _result(resource, ErrorCode.NONE, None)
    return _result(
        resource, ErrorCode.UNKNOWN_SERVER_ERROR, "the configs kept changing meanwhile; try again"
    )


def _topic_exists(name: str) -> ZkScript[bool]:
    """The topic exists and is not being deleted."""
    if (yield from exists(zk_data.topic_path(name))) is None:
        return False
    return (yield from exists(zk_data.delete_topic_path(name))) is None


def _result(
    resource: AlterConfigsResource, code: ErrorCode, message: str | None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        code, message, resource.resource_type, resource.resource_name
    )
