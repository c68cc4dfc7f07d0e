"""FindCoordinator: the broker leading a group's `__consumer_offsets` partition. The first
authorized ask creates the topic (Kafka's behaviour); until it has leaders:
COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from broker.context import SESSION, BrokerContext
from broker.core.group.writes import coordinator_of
from broker.core.request_acls import find_coordinator_denied
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import (
    GROUP_KEY_TYPE,
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from protocol.topic_partition import OFFSETS_TOPIC

__all__ = ["handle_find_coordinator"]


async def handle_find_coordinator(
    ctx: BrokerContext, header: RequestHeader, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    def failed(key: str, code: ErrorCode, message: str) -> Coordinator:
        return Coordinator(key, -1, "", -1, code, message)

    coordinator = ctx.group_coordinator
    if request.key_type != GROUP_KEY_TYPE:
        return FindCoordinatorResponse(
            tuple(
                failed(k, ErrorCode.INVALID_REQUEST, "only group coordinators (key type 0)")
                for k in request.coordinator_keys
            )
        )
    # Authorized first: only a key the principal may DESCRIBE creates the offsets topic (as
    # Kafka's handleFindCoordinatorRequest, which looks the coordinator up after the check).
    refused: dict[str, Coordinator] = {}
    not_described = find_coordinator_denied(request, ctx.authorize)
    for key in request.coordinator_keys:
        if not key:
            refused[key] = failed(key, ErrorCode.INVALID_GROUP_ID, "a group id is not empty")
        elif key in not_described:
            denied = ctx.denied(AclOperation.DESCRIBE, ResourceType.GROUP, key)
            refused[key] = failed(key, ErrorCode.GROUP_AUTHORIZATION_FAILED, denied)
    metadata = ctx.state.metadata
    allowed = [k for k in request.coordinator_keys if k not in refused]
    if allowed and coordinator is not None and OFFSETS_TOPIC not in metadata.topics:
        await coordinator.ensure_offsets_topic()
    reachable = metadata.brokers_on(SESSION.get().listener)
    found = []
    for key in request.coordinator_keys:
        if key in refused:
            found.append(refused[key])
            continue
        broker = coordinator_of(metadata, key)
        if broker is None:
            found.append(
                failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "the offsets topic has no leader")
            )
        elif broker.node_id not in reachable:
            message = "the coordinator has no endpoint on this listener"
            found.append(failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, message))
        else:
            broker = reachable[broker.node_id]
            found.append(Coordinator(key, broker.node_id, broker.host, broker.port, ErrorCode.NONE))
    return FindCoordinatorResponse(tuple(found))
