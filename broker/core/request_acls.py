"""What the data-plane requests, the group APIs and the ACL changes need of the authorizer
(Kafka's KafkaApis checks), as pure functions of the request and an `Allowed` answer for the
caller's principal.

The broker's handlers pass `BrokerContext.authorize`; the simulator passes the same
`broker.core.authorizer.authorize` over its brokers' ACLs, so both ask for the same
permissions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from broker.core.principal import Principal
from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
)
from protocol.messages.offset_fetch import (
    OffsetFetchPartition,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from protocol.messages.produce import ProduceRequest

__all__ = [
    "Allowed",
    "CommitSplit",
    "authorized_offset_fetch",
    "denied_message",
    "describable_offsets",
    "fetch_denied",
    "find_coordinator_denied",
    "heartbeat_denied",
    "heartbeat_refusal",
    "may_change_acls",
    "may_describe_acls",
    "may_fetch_offsets",
    "may_follow",
    "offset_commit_denied",
    "offset_commit_refused",
    "produce_denied",
    "split_offset_commit",
]

# May the request's principal do this operation on this resource?
Allowed = Callable[[AclOperation, ResourceType, str], bool]


def denied_message(
    principal: Principal, operation: AclOperation, resource_type: ResourceType, *names: str
) -> str:
    """A refusal's error_message: who may not do what on which resource (Kafka's only says
    "Not authorized to access topics: [sec]"), so a client can tell which grant is missing."""
    kind = resource_type.name.lower()
    what = f"{kind} {CLUSTER_NAME}"
    if resource_type is not ResourceType.CLUSTER:
        what = f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names)}"
    return f"{principal} may not {operation.name} {what}"


def produce_denied(request: ProduceRequest, allowed: Allowed) -> frozenset[str]:
    """The topics the producer may not WRITE (each refused with TOPIC_AUTHORIZATION_FAILED)."""
    topics = sorted({t.name for t in request.topic_data})
    return frozenset(t for t in topics if not allowed(AclOperation.WRITE, ResourceType.TOPIC, t))


def fetch_denied(request: FetchRequest, allowed: Allowed) -> frozenset[str]:
    """A consumer's fetch needs READ on each topic; a follower's (replica_id >= 0) was
    authorized as a whole by `may_follow`."""
    if request.replica_id >= 0:
        return frozenset()
    topics = sorted({t.topic for t in request.topics})
    return frozenset(t for t in topics if not allowed(AclOperation.READ, ResourceType.TOPIC, t))


def may_follow(allowed: Allowed) -> bool:
    """A follower's fetch moves HWs and the ISR: CLUSTER_ACTION on the cluster."""
    return allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)


def may_change_acls(allowed: Allowed) -> bool:
    """CreateAcls and DeleteAcls: ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED)."""
    return allowed(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)


def may_describe_acls(allowed: Allowed) -> bool:
    """DescribeAcls: DESCRIBE on the cluster."""
    return allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)


def find_coordinator_denied(request: FindCoordinatorRequest, allowed: Allowed) -> frozenset[str]:
    """The group ids (not empty: those are invalid) the principal may not DESCRIBE (each
    GROUP_AUTHORIZATION_FAILED; only an allowed one may create the offsets topic)."""
    keys = sorted({k for k in request.coordinator_keys if k})
    return frozenset(k for k in keys if not allowed(AclOperation.DESCRIBE, ResourceType.GROUP, k))


def offset_commit_denied(request: OffsetCommitRequest, allowed: Allowed) -> frozenset[str] | None:
    """None without READ on the group (all GROUP_AUTHORIZATION_FAILED, topics not asked);
    else the topics without READ (TOPIC_AUTHORIZATION_FAILED; the rest are committed)."""
    if not allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return None
    topics = sorted({t.name for t in request.topics})
    return frozenset(t for t in topics if not allowed(AclOperation.READ, ResourceType.TOPIC, t))


@dataclass(frozen=True, slots=True)
class CommitSplit:
    """An OffsetCommit after its ACL checks: what goes to the coordinator (None: nothing) and
    what is answered apart (merged into the coordinator's answer)."""

    request: OffsetCommitRequest | None
    refused: OffsetCommitResponse

    def merged(self, response: OffsetCommitResponse) -> OffsetCommitResponse:
        if not self.refused.topics:
            return response
        return replace(response, topics=response.topics + self.refused.topics)


def split_offset_commit(
    request: OffsetCommitRequest, not_read: frozenset[str] | None
) -> CommitSplit:
    """As KafkaApis.handleOffsetCommitRequest: without READ on the group every partition is
    GROUP_AUTHORIZATION_FAILED; topics without READ are TOPIC_AUTHORIZATION_FAILED and the
    rest committed; when nothing is left the coordinator is not asked."""
    if not_read is None:
        return CommitSplit(
            None, offset_commit_refused(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        )
    denied = [t for t in request.topics if t.name in not_read]
    if not denied:
        return CommitSplit(request, OffsetCommitResponse(()))
    kept = tuple(t for t in request.topics if t.name not in not_read)
    refused = offset_commit_refused(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return CommitSplit(replace(request, topics=kept) if kept else None, refused)


def offset_commit_refused(
    topics: Sequence[OffsetCommitTopic], code: ErrorCode
) -> OffsetCommitResponse:
    """Every partition of these topics answered with `code`."""
    return OffsetCommitResponse(
        tuple(
            OffsetCommitTopicResponse(
                t.name,
                tuple(OffsetCommitPartitionResponse(p.partition_index, code) for p in t.partitions),
            )
            for t in topics
        )
    )


def may_fetch_offsets(request: OffsetFetchRequest, allowed: Allowed) -> bool:
    """OffsetFetch: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED)."""
    return allowed(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id)


def authorized_offset_fetch(
    request: OffsetFetchRequest,
    fetch: Callable[[OffsetFetchRequest], OffsetFetchResponse],
    allowed: Allowed | None,
) -> OffsetFetchResponse:
    """OffsetFetch as KafkaApis answers it: GROUP_AUTHORIZATION_FAILED without DESCRIBE on the
    group, else what `fetch` reads less what the principal may not see (`describable_offsets`).
    `allowed` None: no authorizer, nothing to check."""
    if allowed is not None and not may_fetch_offsets(request, allowed):
        return OffsetFetchResponse((), ErrorCode.GROUP_AUTHORIZATION_FAILED)
    fetched = fetch(request)
    return fetched if allowed is None else describable_offsets(request, fetched, allowed)


def describable_offsets(
    request: OffsetFetchRequest, response: OffsetFetchResponse, allowed: Allowed
) -> OffsetFetchResponse:
    """Kafka: topics the principal may not DESCRIBE are left out of "all topics", and refused
    (TOPIC_AUTHORIZATION_FAILED, offset -1) when named."""
    described: dict[str, bool] = {}

    def describable(topic: str) -> bool:
        if topic not in described:
            described[topic] = allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        return described[topic]

    if request.topics is None:
        return replace(response, topics=tuple(t for t in response.topics if describable(t.name)))
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return replace(
        response,
        topics=tuple(
            t
            if describable(t.name)
            else replace(
                t,
                partitions=tuple(
                    OffsetFetchPartition(p.partition_index, -1, refused) for p in t.partitions
                ),
            )
            for t in response.topics
        ),
    )


def heartbeat_refusal(
    request: ConsumerGroupHeartbeatRequest, allowed: Allowed, principal: Principal
) -> ConsumerGroupHeartbeatResponse | None:
    """ConsumerGroupHeartbeat's answer when `heartbeat_denied` refuses it; None when not."""
    refused, names = heartbeat_denied(request, allowed)
    if refused == ErrorCode.GROUP_AUTHORIZATION_FAILED:
        message = denied_message(principal, AclOperation.READ, ResourceType.GROUP, *names)
        return ConsumerGroupHeartbeatResponse(refused, message)
    if refused == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        message = denied_message(principal, AclOperation.DESCRIBE, ResourceType.TOPIC, *names)
        return ConsumerGroupHeartbeatResponse(refused, message)
    return None


def heartbeat_denied(
    request: ConsumerGroupHeartbeatRequest, allowed: Allowed
) -> tuple[ErrorCode, tuple[str, ...]]:
    """ConsumerGroupHeartbeat: GROUP_AUTHORIZATION_FAILED without READ on the group; else
    TOPIC_AUTHORIZATION_FAILED and the subscribed topics the member may not DESCRIBE (Kafka:
    a subscription names only those); else NONE."""
    if not allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, (request.group_id,)
    topics = sorted(set(request.subscribed_topic_names or ()))
    hidden = tuple(t for t in topics if not allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t))
    return (ErrorCode.TOPIC_AUTHORIZATION_FAILED, hidden) if hidden else (ErrorCode.NONE, ())
