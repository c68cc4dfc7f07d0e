"""AlterPartitionReassignments and ListPartitionReassignments (admin -> controller).

Only the active controller answers (NOT_CONTROLLER otherwise: the admin client refreshes its
metadata and asks the controller). Alter is serialised with the controller's other events and
answers per partition once the reassignment has started (or been cancelled): NONE,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicates, or a broker that
is not registered), NO_REASSIGNMENT_IN_PROGRESS (a cancel with nothing to cancel). The moves
themselves go on in the background; List shows what is still in progress. A throttle
(bytes/s, v1) caps how fast the adding replicas of the partitions it starts copy.
"""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_alter_partition_reassignments", "handle_list_partition_reassignments"]

_MESSAGES = {
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: (
        "target replicas must be non-empty, distinct and registered brokers"
    ),
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: "no reassignment in progress to cancel",
}


async def handle_alter_partition_reassignments(
    ctx: BrokerContext, header: RequestHeader, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ctx.denied(AclOperation.ALTER, ResourceType.CLUSTER)
        return AlterPartitionReassignmentsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    controller = ctx.controller
    if not controller.is_active:
        return AlterPartitionReassignmentsResponse(ErrorCode.NOT_CONTROLLER)
    throttle = request.replication_throttle_bytes_per_sec
    if throttle != -1 and throttle <= 0:
        return AlterPartitionReassignmentsResponse(
            ErrorCode.INVALID_REQUEST, "the replication throttle must be positive (or -1: none)"
        )
    targets: dict[TopicPartition, tuple[int, ...] | None] = {}
    for topic in request.topics:
        for p in topic.partitions:
            targets[TopicPartition(topic.name, p.partition_index)] = (
                None if p.replicas is None else tuple(p.replicas)
            )
    results = await controller.alter_reassignments(
        targets, request.timeout_ms, request.replication_throttle_bytes_per_sec
    )
    if results and all(code == ErrorCode.NOT_CONTROLLER for code in results.values()):
        return AlterPartitionReassignmentsResponse(ErrorCode.NOT_CONTROLLER)
    for tp in targets:
        results.setdefault(tp, ErrorCode.REQUEST_TIMED_OUT)
    by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
    for (name, partition), code in sorted(results.items()):
        by_topic.setdefault(name, []).append(
            ReassignablePartitionResponse(partition, code, _MESSAGES.get(code))
        )
    return AlterPartitionReassignmentsResponse(
        ErrorCode.NONE,
        responses=tuple(ReassignableTopicResponse(t, tuple(ps)) for t, ps in by_topic.items()),
    )


async def handle_list_partition_reassignments(
    ctx: BrokerContext, header: RequestHeader, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        denied = ctx.denied(AclOperation.DESCRIBE, ResourceType.CLUSTER)
        return ListPartitionReassignmentsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    ongoing = ctx.controller.list_reassignments()
    if ongoing is None:
        return ListPartitionReassignmentsResponse(ErrorCode.NOT_CONTROLLER)
    wanted = (
        None
        if request.topics is None
        else {(t.name, p) for t in request.topics for p in t.partition_indexes}
    )
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for (topic, partition), r in sorted(ongoing.items()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(
            OngoingPartitionReassignment(partition, r.replicas, r.adding, r.removing)
        )
    return ListPartitionReassignmentsResponse(
        ErrorCode.NONE,
        topics=tuple(OngoingTopicReassignment(t, tuple(ps)) for t, ps in by_topic.items()),
    )
