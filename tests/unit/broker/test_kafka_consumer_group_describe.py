"""ConsumerGroupDescribe (69) on the Kafka listener: the coordinator marks classic members,
the native describe names their type, and broker.kafka.translate answers in Kafka's shape
(partitions by topic id and name) with Kafka 4.0's GROUP_ID_NOT_FOUND for a group that is not
a consumer group."""

from __future__ import annotations

import io
import uuid

import pytest
from kio.serial import entity_reader, entity_writer

from broker.core.group.classic import ClassicJoin, join_heartbeat
from broker.kafka.translate import request_to_highwater, response_to_kafka
from protocol.errors import ErrorCode
from protocol.kafka.frames import KafkaHeader, KafkaRequest, request_class, response_class
from protocol.kafka.versions import ADVERTISED
from protocol.messages.consumer_group_describe import (
    CLASSIC_MEMBER,
    CONSUMER_MEMBER,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    DescribedMember,
)
from protocol.messages.consumer_group_heartbeat import TopicPartitions
from protocol.topic_id import from_uuid
from tests.unit.group.helpers import Shell

TOPIC_UUID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_ID = from_uuid(TOPIC_UUID)


def kafka(version: int, *groups: str) -> KafkaRequest:
    body = request_class(69, version)(group_ids=groups, include_authorized_operations=False)
    return KafkaRequest(KafkaHeader(69, version, 7, "test"), body)


def member(member_id: str, member_type: int) -> DescribedMember:
    return DescribedMember(
        member_id=member_id,
        instance_id=None,
        member_epoch=3,
        client_id="rdkafka",
        client_host="/127.0.0.1",
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        assignment=(TopicPartitions("t", (0, 1), TOPIC_ID),),
        target_assignment=(TopicPartitions("t", (0, 1, 2), TOPIC_ID),),
        member_type=member_type,
    )


def group(group_id: str, *members: DescribedMember, epoch: int = 3) -> DescribedGroup:
    return DescribedGroup(
        group_id, ErrorCode.NONE, None, "Reconciling", epoch, epoch, "uniform", members
    )


def answer(version: int, *groups: DescribedGroup) -> tuple[object, ...]:
    """The Kafka response as a client reads it back from the bytes."""
    translated = request_to_highwater(kafka(version, *(g.group_id for g in groups)))
    body = response_to_kafka(translated, ConsumerGroupDescribeResponse(groups))
    cls = response_class(69, version)
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    read, _ = entity_reader(cls)(out.getvalue(), 0)
    return tuple(read.groups)


def test_it_is_advertised_at_the_versions_kio_has() -> None:
    assert ADVERTISED[69] == (0, 1)


@pytest.mark.parametrize("version", [0, 1])
def test_the_request_becomes_the_native_describe(version: int) -> None:
    translated = request_to_highwater(kafka(version, "a", "b"))
    assert translated.body == ConsumerGroupDescribeRequest(("a", "b"))


def test_members_name_topics_by_id_and_name_with_their_type() -> None:
    (described,) = answer(
        1, group("g", member("c1", CONSUMER_MEMBER), member("k1", CLASSIC_MEMBER))
    )
    assert (described.error_code, described.group_state, described.group_epoch) == (
        0,
        "Reconciling",
        3,
    )
    first, second = described.members
    assert (first.member_id, first.member_epoch, first.member_type) == ("c1", 3, 1)
    assert second.member_type == 0
    (owned,) = first.assignment.topic_partitions
    (target,) = first.target_assignment.topic_partitions
    assert (owned.topic_id, owned.topic_name, owned.partitions) == (TOPIC_UUID, "t", (0, 1))
    assert (target.topic_id, target.partitions) == (TOPIC_UUID, (0, 1, 2))


def test_v0_has_no_member_type_but_the_same_members() -> None:
    (described,) = answer(0, group("g", member("c1", CONSUMER_MEMBER)))
    (only,) = described.members
    assert only.member_id == "c1" and not hasattr(only, "member_type")
    assert only.assignment.topic_partitions[0].topic_id == TOPIC_UUID


def test_an_unknown_group_is_not_found_as_kafka_says_it() -> None:
    (described,) = answer(1, DescribedGroup("nope", ErrorCode.GROUP_ID_NOT_FOUND, "no such group"))
    assert (described.error_code, described.error_message) == (69, "Group nope not found.")


def test_classic_members_only_or_offsets_only_is_not_a_consumer_group() -> None:
    classic = group("classic", member("k1", CLASSIC_MEMBER))
    offsets = DescribedGroup("offsets", ErrorCode.NONE, None, "Empty")  # no group record
    a, b = answer(1, classic, offsets)
    assert (a.error_code, a.error_message) == (69, "Group classic is not a consumer group.")
    assert (b.error_code, b.error_message) == (69, "Group offsets is not a consumer group.")
    assert a.members == b.members == ()


def test_other_errors_pass_through() -> None:
    (described,) = answer(1, DescribedGroup("g", ErrorCode.NOT_COORDINATOR))
    assert (described.error_code, described.members) == (ErrorCode.NOT_COORDINATOR, ())


def test_the_coordinator_marks_a_member_that_joined_with_join_group() -> None:
    shell = Shell()
    shell.topics["t"] = 2
    shell.heartbeat("g", "", 0)  # a consumer-protocol member: m1
    join = ClassicJoin("g", "", None, 300_000, ("range",), ("t",), (), "rdkafka")
    request = join_heartbeat(join, None)
    shell.run(shell.core.heartbeat(request, shell.topics, 0, wall_ms=0, classic=True))  # m2
    types = {m.member_id: m.member_type for m in shell.core.describe("g").members}
    assert types == {"m1": CONSUMER_MEMBER, "m2": CLASSIC_MEMBER}
    # The mark is in the group's record: a coordinator that loads it knows it too.
    rebuilt = {m.member_id: m.member_type for m in shell.rebuilt().describe("g").members}
    assert rebuilt == types
