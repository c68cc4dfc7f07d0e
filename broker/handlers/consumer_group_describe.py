"""ConsumerGroupDescribe (KIP-848): state, epochs, assignor and members of groups this broker
coordinates (others: NOT_COORDINATOR, each). From v1 members' partitions carry their topic's
id (KIP-516), as the Kafka listener answers them (broker.kafka.translate)."""

from __future__ import annotations

from dataclasses import replace

from broker.context import BrokerContext
from broker.core.group.topic_ids import with_topic_ids
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)

__all__ = ["handle_consumer_group_describe"]

_TOPIC_IDS_VERSION = 1


async def handle_consumer_group_describe(
    ctx: BrokerContext, header: RequestHeader, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    coordinator = ctx.group_coordinator
    groups = tuple(
        DescribedGroup(
            g,
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            ctx.denied(AclOperation.DESCRIBE, ResourceType.GROUP, g),
        )
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)
        else _visible(ctx, coordinator.core.describe(g))
        if coordinator.active
        else DescribedGroup(g, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        for g in dict.fromkeys(request.group_ids)
    )
    if header.api_version >= _TOPIC_IDS_VERSION:
        groups = tuple(_with_ids(ctx, g) for g in groups)
    return ConsumerGroupDescribeResponse(groups)


def _with_ids(ctx: BrokerContext, group: DescribedGroup) -> DescribedGroup:
    members = tuple(
        replace(
            m,
            assignment=with_topic_ids(m.assignment, ctx.metadata),
            target_assignment=with_topic_ids(m.target_assignment, ctx.metadata),
        )
        for m in group.members
    )
    return replace(group, members=members)


def _visible(ctx: BrokerContext, group: DescribedGroup) -> DescribedGroup:
    """Kafka's rule (KafkaApis.handleConsumerGroupDescribe): a group whose members subscribe
    to, own or are to own a topic the caller may not DESCRIBE is answered with
    TOPIC_AUTHORIZATION_FAILED and no members, so its topics stay hidden."""
    topics = {
        t
        for m in group.members
        for t in (
            *m.subscribed_topic_names,
            *(a.topic for a in m.assignment),
            *(a.topic for a in m.target_assignment),
        )
    }
    if all(ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in sorted(topics)):
        return group
    return DescribedGroup(
        group.group_id,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "The group has described topic(s) that the client is not authorized to describe.",
    )
