"""ElectLeaders (admin -> controller): preferred or unclean leader elections on demand.

Only the active controller answers (NOT_CONTROLLER otherwise: the admin client refreshes its
metadata and asks the controller). The controller serialises the request with its other
events and answers per partition: NONE (elected), ELECTION_NOT_NEEDED (already the preferred
leader, or for unclean: a live leader), PREFERRED_LEADER_NOT_AVAILABLE (the preferred replica
is not live or not in the ISR), ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica),
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.acl import AclOperation
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
    ReplicaElectionResult,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_elect_leaders"]

_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "leader is already the preferred replica",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "preferred replica is not live or not in the ISR",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "no live replica to elect",
}


async def handle_elect_leaders(
    ctx: BrokerContext, header: RequestHeader, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return ElectLeadersResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if not controller.is_active:
        return ElectLeadersResponse(ErrorCode.NOT_CONTROLLER)
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        return ElectLeadersResponse(ErrorCode.INVALID_REQUEST)
    partitions = (
        None
        if request.topic_partitions is None
        else [TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    results = await controller.elect_leaders(election_type, partitions, request.timeout_ms)
    if results and all(code == ErrorCode.NOT_CONTROLLER for code in results.values()):
        return ElectLeadersResponse(ErrorCode.NOT_CONTROLLER)  # it resigned meanwhile
    if partitions is not None:  # whatever the controller did not answer in time
        for tp in partitions:
            results.setdefault(tp, ErrorCode.REQUEST_TIMED_OUT)
    by_topic: dict[str, list[PartitionElectionResult]] = {}
    for (topic, partition), code in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            PartitionElectionResult(partition, code, _MESSAGES.get(code))
        )
    return ElectLeadersResponse(
        ErrorCode.NONE,
        tuple(ReplicaElectionResult(t, tuple(parts)) for t, parts in by_topic.items()),
    )
