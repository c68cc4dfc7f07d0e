"""What each request needs of the authorizer (broker.core.request_acls), asked of a recording
`Allowed`: the operation and resource, once per topic, and which topics are refused."""

from __future__ import annotations

from broker.core.authorizer import AclOperation, ResourceType
from broker.core.request_acls import (
    Allowed,
    fetch_denied,
    may_change_acls,
    may_describe_acls,
    may_follow,
    produce_denied,
)
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData

Asked = list[tuple[AclOperation, ResourceType, str]]


def grants(*granted: tuple[AclOperation, ResourceType, str]) -> tuple[Asked, Allowed]:
    asked: Asked = []

    def allowed(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        asked.append((operation, resource_type, name))
        return (operation, resource_type, name) in granted

    return asked, allowed


def produce(*topics: str) -> ProduceRequest:
    data = tuple(ProduceTopicData(t, (ProducePartitionData(0, b""),)) for t in topics)
    return ProduceRequest(-1, 1_000, data)


def fetch(replica_id: int, *topics: str) -> FetchRequest:
    wanted = tuple(
        FetchTopic(t, (FetchPartition(0, 0, 100), FetchPartition(1, 0, 100))) for t in topics
    )
    return FetchRequest(replica_id, 0, 0, 1_000, wanted)


def test_produce_needs_write_on_each_topic_asked_once() -> None:
    asked, allowed = grants((AclOperation.WRITE, ResourceType.TOPIC, "a"))
    assert produce_denied(produce("b", "a", "b"), allowed) == {"b"}
    assert asked == [
        (AclOperation.WRITE, ResourceType.TOPIC, "a"),
        (AclOperation.WRITE, ResourceType.TOPIC, "b"),
    ]


def test_a_consumer_fetch_needs_read_on_each_topic() -> None:
    asked, allowed = grants((AclOperation.READ, ResourceType.TOPIC, "a"))
    assert fetch_denied(fetch(-1, "a", "b"), allowed) == {"b"}
    assert {a[0] for a in asked} == {AclOperation.READ}


def test_a_follower_fetch_needs_cluster_action_not_topic_acls() -> None:
    asked, allowed = grants((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"))
    assert fetch_denied(fetch(2, "a"), allowed) == frozenset()
    assert asked == []
    assert may_follow(allowed)
    _, nothing = grants()
    assert not may_follow(nothing)


def test_acl_changes_need_alter_and_reading_them_describe_on_the_cluster() -> None:
    asked, allowed = grants((AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"))
    assert may_describe_acls(allowed)
    assert not may_change_acls(allowed)
    assert asked[-1] == (AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
