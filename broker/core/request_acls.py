"""What the data-plane requests and the ACL changes need of the authorizer (Kafka's KafkaApis
checks), as pure functions of the request and an `Allowed` answer for the caller's principal.

The broker's handlers pass `BrokerContext.authorize`; the simulator passes the same
`broker.core.authorizer.authorize` over its brokers' ACLs, so both ask for the same
permissions.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.core.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from protocol.messages.fetch import FetchRequest
from protocol.messages.produce import ProduceRequest

__all__ = [
    "Allowed",
    "fetch_denied",
    "may_change_acls",
    "may_describe_acls",
    "may_follow",
    "produce_denied",
]

# May the request's principal do this operation on this resource?
Allowed = Callable[[AclOperation, ResourceType, str], bool]


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
