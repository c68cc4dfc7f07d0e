"""What each request needs of the authorizer (broker.core.request_acls), asked of a recording
`Allowed`: the operation and resource, once per topic, and which topics are refused."""

from __future__ import annotations

from broker.core.principal import Principal
from broker.core.request_acls import (
    Allowed,
    authorized_offset_fetch,
    denied_message,
    describable_offsets,
    fetch_denied,
    find_coordinator_denied,
    heartbeat_denied,
    heartbeat_refusal,
    may_change_acls,
    may_describe_acls,
    may_fetch_offsets,
    may_follow,
    offset_commit_denied,
    produce_denied,
    split_offset_commit,
)
from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
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
    OffsetFetchTopic,
    OffsetFetchTopicRequest,
)
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


G = ResourceType.GROUP
T = ResourceType.TOPIC


def test_find_coordinator_needs_describe_on_each_group_not_asked_for_an_empty_id() -> None:
    asked, allowed = grants((AclOperation.DESCRIBE, G, "g1"))
    assert find_coordinator_denied(FindCoordinatorRequest(("g2", "", "g1")), allowed) == {"g2"}
    assert asked == [(AclOperation.DESCRIBE, G, "g1"), (AclOperation.DESCRIBE, G, "g2")]


def test_offset_commit_needs_read_on_the_group_then_on_each_topic() -> None:
    commit = OffsetCommitRequest(
        "g", tuple(OffsetCommitTopic(t, (OffsetCommitPartition(0, 5),)) for t in ("a", "b"))
    )
    asked, nothing = grants((AclOperation.READ, T, "a"))
    assert offset_commit_denied(commit, nothing) is None
    assert asked == [(AclOperation.READ, G, "g")]  # topics not asked without the group
    _, group_and_a = grants((AclOperation.READ, G, "g"), (AclOperation.READ, T, "a"))
    assert offset_commit_denied(commit, group_and_a) == frozenset({"b"})


def test_an_offset_commit_is_split_into_what_is_committed_and_what_is_refused() -> None:
    commit = OffsetCommitRequest(
        "g", tuple(OffsetCommitTopic(t, (OffsetCommitPartition(0, 5),)) for t in ("a", "b"))
    )

    def codes(response: OffsetCommitResponse) -> dict[str, int]:
        return {t.name: p.error_code for t in response.topics for p in t.partitions}

    no_group = split_offset_commit(commit, None)
    assert no_group.request is None
    assert codes(no_group.refused) == {"a": ErrorCode.GROUP_AUTHORIZATION_FAILED} | {
        "b": ErrorCode.GROUP_AUTHORIZATION_FAILED
    }
    everything = split_offset_commit(commit, frozenset())
    assert everything.request == commit and everything.refused.topics == ()
    partly = split_offset_commit(commit, frozenset({"b"}))
    assert partly.request is not None and [t.name for t in partly.request.topics] == ["a"]
    assert codes(partly.refused) == {"b": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    committed = OffsetCommitResponse(
        (OffsetCommitTopicResponse("a", (OffsetCommitPartitionResponse(0, ErrorCode.NONE),)),)
    )
    assert codes(partly.merged(committed)) == {"a": 0, "b": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    nothing_left = split_offset_commit(commit, frozenset({"a", "b"}))
    assert nothing_left.request is None  # the coordinator is not asked, as Kafka
    assert set(codes(nothing_left.refused).values()) == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_a_heartbeat_needs_read_on_the_group_and_describe_on_what_it_subscribes() -> None:
    join = ConsumerGroupHeartbeatRequest("g", "", 0, subscribed_topic_names=("b", "a"))
    _, nothing = grants()
    assert heartbeat_denied(join, nothing) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, ("g",))
    _, group_and_a = grants((AclOperation.READ, G, "g"), (AclOperation.DESCRIBE, T, "a"))
    assert heartbeat_denied(join, group_and_a) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ("b",))
    _, everything = grants(
        (AclOperation.READ, G, "g"),
        (AclOperation.DESCRIBE, T, "a"),
        (AclOperation.DESCRIBE, T, "b"),
    )
    assert heartbeat_denied(join, everything) == (ErrorCode.NONE, ())


def test_offset_fetch_needs_describe_on_the_group_and_hides_or_refuses_other_topics() -> None:
    _, group_and_a = grants((AclOperation.DESCRIBE, G, "g"), (AclOperation.DESCRIBE, T, "a"))
    every = OffsetFetchRequest("g")
    assert may_fetch_offsets(every, group_and_a)
    _, nothing = grants()
    assert not may_fetch_offsets(every, nothing)
    found = OffsetFetchResponse(
        tuple(OffsetFetchTopic(t, (OffsetFetchPartition(0, 7),)) for t in ("a", "b"))
    )
    assert [t.name for t in describable_offsets(every, found, group_and_a).topics] == ["a"]
    named = OffsetFetchRequest(
        "g", (OffsetFetchTopicRequest("a", (0,)), OffsetFetchTopicRequest("b", (0,)))
    )
    answered = describable_offsets(named, found, group_and_a).topics
    assert answered[0] == found.topics[0]
    assert answered[1].partitions == (
        OffsetFetchPartition(0, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    )


def test_offset_fetch_is_refused_before_it_reads_and_filtered_after() -> None:
    found = OffsetFetchResponse(
        tuple(OffsetFetchTopic(t, (OffsetFetchPartition(0, 7),)) for t in ("a", "b"))
    )
    reads: list[OffsetFetchRequest] = []

    def read(request: OffsetFetchRequest) -> OffsetFetchResponse:
        reads.append(request)
        return found

    every = OffsetFetchRequest("g")
    _, nothing = grants()
    refused = authorized_offset_fetch(every, read, nothing)
    assert refused == OffsetFetchResponse((), ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert reads == []
    _, group_and_a = grants((AclOperation.DESCRIBE, G, "g"), (AclOperation.DESCRIBE, T, "a"))
    assert [t.name for t in authorized_offset_fetch(every, read, group_and_a).topics] == ["a"]
    assert authorized_offset_fetch(every, read, None) == found  # no authorizer


def test_a_refused_heartbeat_says_who_may_not_do_what() -> None:
    alice = Principal("User", "alice")
    join = ConsumerGroupHeartbeatRequest("g", "", 0, subscribed_topic_names=("b", "a", "c"))
    _, nothing = grants()
    assert heartbeat_refusal(join, nothing, alice) == ConsumerGroupHeartbeatResponse(
        ErrorCode.GROUP_AUTHORIZATION_FAILED, "User:alice may not READ group g"
    )
    _, group_and_a = grants((AclOperation.READ, G, "g"), (AclOperation.DESCRIBE, T, "a"))
    assert heartbeat_refusal(join, group_and_a, alice) == ConsumerGroupHeartbeatResponse(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED, "User:alice may not DESCRIBE topics b, c"
    )
    _, group = grants((AclOperation.READ, G, "g"))
    assert heartbeat_refusal(ConsumerGroupHeartbeatRequest("g", "", 0), group, alice) is None
    cluster = denied_message(alice, AclOperation.ALTER, ResourceType.CLUSTER)
    assert cluster == "User:alice may not ALTER cluster kafka-cluster"
