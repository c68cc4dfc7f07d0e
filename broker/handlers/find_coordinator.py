"""FindCoordinator: the broker leading a group's `__consumer_offsets` partition (decided in
broker/core/group/find_coordinator.py). The first authorized ask creates the topic (Kafka's
behaviour); until it has leaders: COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from broker.context import SESSION, BrokerContext
from broker.core.group.find_coordinator import (
    answer_find_coordinator,
    find_coordinator_refusals,
    wants_offsets_topic,
)
from broker.core.request_acls import find_coordinator_denied
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.messages.find_coordinator import (
    GROUP_KEY_TYPE,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

__all__ = ["handle_find_coordinator"]


async def handle_find_coordinator(
    ctx: BrokerContext, header: RequestHeader, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    # Authorized first: only a key the principal may DESCRIBE creates the offsets topic (as
    # Kafka's handleFindCoordinatorRequest, which looks the coordinator up after the check).
    not_described = (
        find_coordinator_denied(request, ctx.authorize)
        if request.key_type == GROUP_KEY_TYPE
        else frozenset()
    )
    refused = find_coordinator_refusals(
        request,
        not_described,
        lambda key: ctx.denied(AclOperation.DESCRIBE, ResourceType.GROUP, key),
    )
    metadata = ctx.state.metadata
    coordinator = ctx.group_coordinator
    if wants_offsets_topic(request, refused, metadata):
        await coordinator.ensure_offsets_topic()
    return answer_find_coordinator(request, refused, metadata, SESSION.get().listener)
