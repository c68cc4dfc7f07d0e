"""The group APIs' translation between Kafka's requests and Highwater's (broker.kafka.translate):
FindCoordinator's single key before v4, OffsetCommit's generation, KIP-848's heartbeat by
topic id and ConsumerGroupDescribe's members, with what Kafka does not call a consumer group.
Pure."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from broker.core.group.classic import heartbeat_error
from broker.kafka.translated import Translated, topic_id_of
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka.frames import KafkaRequest
from protocol.kafka.mapping import convert
from protocol.messages.consumer_group_describe import CLASSIC_MEMBER, DescribedGroup
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.consumer_group_heartbeat import TopicPartitions as HeartbeatPartitions
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import OffsetCommitRequest

__all__ = [
    "consumer_group_describe_response",
    "consumer_group_heartbeat",
    "find_coordinator",
    "find_coordinator_response",
    "offset_commit",
    "offset_commit_response",
]


def find_coordinator(kafka: KafkaRequest) -> Translated:
    body = kafka.body
    request = FindCoordinatorRequest((body.key,), getattr(body, "key_type", 0))
    return Translated(ApiKey.FIND_COORDINATOR, request, kafka)


def find_coordinator_response(translated: Translated, response: Any) -> Any:
    (coordinator,) = response.coordinators
    return _Flat(
        throttle_time_ms=response.throttle_time_ms,
        error_code=coordinator.error_code,
        error_message=coordinator.error_message,
        node_id=coordinator.node_id,
        host=coordinator.host,
        port=coordinator.port,
    )


@dataclass(frozen=True, slots=True)
class _Flat:
    """FindCoordinator's response before v4 (one coordinator, its fields at the top)."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


def offset_commit(kafka: KafkaRequest) -> Translated:
    request = convert(kafka.body, OffsetCommitRequest)
    epoch = kafka.body.generation_id_or_member_epoch
    request = dataclasses.replace(request, member_epoch=epoch)
    return Translated(ApiKey.OFFSET_COMMIT, request, kafka)


def offset_commit_response(translated: Translated, response: Any) -> Any:
    """A classic member's stale generation is ILLEGAL_GENERATION (broker.core.group.classic)."""
    topics = tuple(
        dataclasses.replace(
            t,
            partitions=tuple(
                dataclasses.replace(p, error_code=heartbeat_error(p.error_code))
                for p in t.partitions
            ),
        )
        for t in response.topics
    )
    return dataclasses.replace(response, topics=topics)


def consumer_group_heartbeat(kafka: KafkaRequest) -> Translated:
    """KIP-848's member heartbeat: owned partitions name their topic by id, which the
    handler resolves (broker.core.group.topic_ids)."""
    body = kafka.body
    owned = None
    if body.topic_partitions is not None:
        owned = tuple(
            HeartbeatPartitions("", tuple(t.partitions), topic_id_of(t.topic_id))
            for t in body.topic_partitions
        )
    request = ConsumerGroupHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=int(body.rebalance_timeout.total_seconds() * 1000),
        subscribed_topic_names=body.subscribed_topic_names,
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),  # v1
        server_assignor=body.server_assignor,
        topic_partitions=owned,
    )
    return Translated(ApiKey.CONSUMER_GROUP_HEARTBEAT, request, kafka)


def consumer_group_describe_response(translated: Translated, response: Any) -> Any:
    """Kafka's shape (members' partitions by topic id and name, each assignment a struct) and
    Kafka 4.0's answers for what is not a consumer group (GroupMetadataManager.consumerGroup):
    no group at all is "not found"; one of classic members only, an emptied classic group, or
    one of committed offsets only (a memberless commit makes a classic group in Kafka), is
    "not a consumer group" (the native describe gives the last two no epochs)."""
    return _DescribeResponse(
        response.throttle_time_ms, tuple(map(_described_for_kafka, response.groups))
    )


def _described_for_kafka(group: DescribedGroup) -> Any:
    gid = group.group_id
    if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return _not_found(gid, "not found")
    if group.error_code != ErrorCode.NONE:
        return group
    offsets_only = group.group_epoch < 0
    classic_only = bool(group.members) and all(
        m.member_type == CLASSIC_MEMBER for m in group.members
    )
    if offsets_only or classic_only:
        return _not_found(gid, "is not a consumer group")
    members = tuple(
        _DescribeMember(
            **{
                f.name: getattr(m, f.name)
                for f in dataclasses.fields(m)
                if f.name not in ("assignment", "target_assignment")
            },
            assignment=_DescribeAssignment(_kafka_partitions(m.assignment)),
            target_assignment=_DescribeAssignment(_kafka_partitions(m.target_assignment)),
        )
        for m in group.members
    )
    return _DescribeGroup(
        group.group_id,
        group.error_code,
        group.error_message,
        group.group_state,
        group.group_epoch,
        group.assignment_epoch,
        group.assignor_name,
        members,
    )


def _not_found(group_id: str, why: str) -> DescribedGroup:
    return DescribedGroup(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {why}.")


def _kafka_partitions(partitions: tuple[Any, ...]) -> tuple[_DescribePartitions, ...]:
    return tuple(_DescribePartitions(p.topic_id, p.topic, p.partitions) for p in partitions)


@dataclass(frozen=True, slots=True)
class _DescribePartitions:
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _DescribeAssignment:
    topic_partitions: tuple[_DescribePartitions, ...]


@dataclass(frozen=True, slots=True)
class _DescribeMember:
    member_id: str
    instance_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: _DescribeAssignment
    target_assignment: _DescribeAssignment
    member_type: int


@dataclass(frozen=True, slots=True)
class _DescribeGroup:
    group_id: str
    error_code: int
    error_message: str | None
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[_DescribeMember, ...]


@dataclass(frozen=True, slots=True)
class _DescribeResponse:
    throttle_time_ms: int
    groups: tuple[Any, ...]
