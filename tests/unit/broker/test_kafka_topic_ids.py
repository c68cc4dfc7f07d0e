"""Topic ids (KIP-516) on the Kafka listener: Metadata v10-12, Fetch v13-16 and KIP-848's
ConsumerGroupHeartbeat translated to and from Highwater's messages (broker.kafka.translate),
and the handlers' id resolution (broker.core.fetch_topic_ids, broker.core.group.topic_ids)."""

from __future__ import annotations

import dataclasses
import datetime
import uuid

import pytest

from broker.core.fetch_topic_ids import resolve_topic_ids, with_topic_ids
from broker.core.group.topic_ids import named_partitions
from broker.core.group.topic_ids import with_topic_ids as with_partition_ids
from broker.kafka.translate import request_to_highwater, response_to_kafka
from protocol.errors import ErrorCode
from protocol.kafka.frames import KafkaHeader, KafkaRequest, encode_kafka_response, request_class
from protocol.kafka.versions import ADVERTISED
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicPartitions,
)
from protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResponse,
    ForgottenTopic,
)
from protocol.messages.metadata import MetadataResponse, MetadataTopic
from protocol.topic_id import from_uuid

TOPIC_UUID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_ID = from_uuid(TOPIC_UUID)


def kafka(api_key: int, version: int, body: object) -> KafkaRequest:
    return KafkaRequest(KafkaHeader(api_key, version, 7, "test"), body)


def test_the_advertised_versions_reach_topic_ids() -> None:
    assert ADVERTISED[1] == (4, 16)  # Fetch: ids from 13
    assert ADVERTISED[3] == (0, 12)  # Metadata: ids from 10
    assert ADVERTISED[20] == (1, 6)  # DeleteTopics: by id from 6
    assert ADVERTISED[68] == (0, 1)  # ConsumerGroupHeartbeat: ids throughout


def test_metadata_v12_asks_by_name_and_by_id() -> None:
    cls = request_class(3, 12)
    module = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    by_name = module.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="a")
    by_id = module.MetadataRequestTopic(topic_id=TOPIC_UUID, name=None)
    body = cls(
        topics=(by_name, by_id),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    translated = request_to_highwater(kafka(3, 12, body))
    assert translated.body.topics == ("a",)
    assert translated.body.topic_ids == (TOPIC_ID,)


@pytest.mark.parametrize("version", [10, 12])
def test_metadata_answers_each_topics_uuid(version: int) -> None:
    cls = request_class(3, version)
    flags = {"include_topic_authorized_operations": False}
    if version < 11:
        flags["include_cluster_authorized_operations"] = False
    body = cls(topics=None, allow_auto_topic_creation=False, **flags)
    translated = request_to_highwater(kafka(3, version, body))
    response = MetadataResponse(
        (),
        "c",
        1,
        (
            MetadataTopic(ErrorCode.NONE, "a", (), topic_id=TOPIC_ID),
            MetadataTopic(ErrorCode.UNKNOWN_TOPIC_ID, "", (), topic_id=from_uuid(uuid.UUID(int=5))),
        ),
    )
    out = response_to_kafka(translated, response)
    known, unknown = out.topics
    assert (known.name, known.topic_id) == ("a", TOPIC_UUID)
    # The response's name is nullable from v12 (Kafka's null for an unknown id).
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert unknown.name == (None if version == 12 else "")
    assert unknown.topic_id == uuid.UUID(int=5)
    assert encode_kafka_response(translated.kafka.header, out)


@pytest.mark.parametrize("version", [13, 15, 16])
def test_fetch_v13_and_later_name_topics_by_id(version: int) -> None:
    cls = request_class(1, version)
    module = __import__(cls.__module__, fromlist=["FetchTopic"])
    partition = module.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1024)
    body = cls(
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=3,
        session_epoch=2,
        topics=(module.FetchTopic(topic_id=TOPIC_UUID, partitions=(partition,)),),
        forgotten_topics_data=(module.ForgottenTopic(topic_id=TOPIC_UUID, partitions=(1,)),),
        **({"replica_id": 2} if version < 15 else {}),
    )
    translated = request_to_highwater(kafka(1, version, body))
    request = translated.body
    assert request.replica_id == -1  # every request on this listener is a client's
    assert (request.max_wait_ms, request.session_id, request.session_epoch) == (500, 3, 2)
    (topic,) = request.topics
    assert (topic.topic, topic.topic_id) == ("", TOPIC_ID)
    assert topic.partitions == (FetchPartition(0, 5, 1024),)
    assert request.forgotten_topics_data == (ForgottenTopic("", (1,), TOPIC_ID),)
    data = FetchPartitionData(0, ErrorCode.NONE, 9, 0, b"")
    response = FetchResponse(ErrorCode.NONE, (FetchTopicResponse("t", (data,), TOPIC_ID),))
    out = response_to_kafka(translated, response)
    (answered,) = out.responses
    assert answered.topic_id == TOPIC_UUID
    assert encode_kafka_response(translated.kafka.header, out)


def test_fetch_by_id_resolves_names_and_answers_unknown_ids() -> None:
    names = {TOPIC_ID: "t"}
    request = FetchRequest(
        -1,
        500,
        1,
        1 << 20,
        (
            FetchTopic("", (FetchPartition(0, 0, 10),), TOPIC_ID),
            FetchTopic("", (FetchPartition(1, 0, 10), FetchPartition(2, 0, 10)), "gone"),
        ),
        forgotten_topics_data=(ForgottenTopic("", (3,), TOPIC_ID), ForgottenTopic("", (0,), "x")),
    )
    resolved, unknown = resolve_topic_ids(request, names.get)
    assert [(t.topic, t.topic_id) for t in resolved.topics] == [("t", TOPIC_ID)]
    assert resolved.forgotten_topics_data == (ForgottenTopic("t", (3,), TOPIC_ID),)
    (missing,) = unknown
    assert missing.topic_id == "gone"
    assert [(p.partition_index, p.error_code) for p in missing.partitions] == [
        (1, ErrorCode.UNKNOWN_TOPIC_ID),
        (2, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    read = FetchResponse(ErrorCode.NONE, (FetchTopicResponse("t", ()),))
    answered = with_topic_ids(read, {"t": TOPIC_ID}.__getitem__, unknown)
    assert [(t.topic, t.topic_id) for t in answered.responses] == [("t", TOPIC_ID), ("", "gone")]
    refused = FetchResponse(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ())
    assert with_topic_ids(refused, {"t": TOPIC_ID}.__getitem__, unknown).responses == ()


def test_fetch_by_id_answers_inconsistent_topic_id_where_the_log_holds_another() -> None:
    """Kafka's ReplicaManager.readFromLog: the id resolves to the topic, but this broker's
    log of a partition holds another id (a deleted topic's): that partition is not read."""
    request = FetchRequest(
        -1,
        500,
        1,
        1 << 20,
        (
            FetchTopic(
                "",
                (FetchPartition(0, 0, 10), FetchPartition(1, 0, 10), FetchPartition(2, 0, 10)),
                TOPIC_ID,
            ),
        ),
    )
    logs = {("t", 0): "AAAAAAAAAAAAAAAAAAAAAQ", ("t", 1): TOPIC_ID}  # t-2: no id stored
    resolved, refused = resolve_topic_ids(request, {TOPIC_ID: "t"}.get, lambda tp: logs.get(tp, ""))
    (topic,) = resolved.topics
    assert (topic.topic, [p.partition for p in topic.partitions]) == ("t", [1, 2])
    (inconsistent,) = refused
    assert inconsistent.topic_id == TOPIC_ID
    assert [(p.partition_index, p.error_code) for p in inconsistent.partitions] == [
        (0, ErrorCode.INCONSISTENT_TOPIC_ID)
    ]
    only = dataclasses.replace(
        request,
        topics=(dataclasses.replace(topic, topic="", partitions=(FetchPartition(0, 0, 10),)),),
    )
    resolved, refused = resolve_topic_ids(only, {TOPIC_ID: "t"}.get, lambda tp: logs.get(tp, ""))
    assert resolved.topics == ()
    assert [p.error_code for p in refused[0].partitions] == [ErrorCode.INCONSISTENT_TOPIC_ID]


@pytest.mark.parametrize("version", [0, 1])
def test_a_kip_848_heartbeat_names_owned_topics_by_id_and_is_answered_by_id(version: int) -> None:
    cls = request_class(68, version)
    module = __import__(cls.__module__, fromlist=["TopicPartitions"])
    body = cls(
        group_id="g",
        member_id="m",
        member_epoch=3,
        rebalance_timeout=datetime.timedelta(milliseconds=300_000),
        subscribed_topic_names=("t",),
        server_assignor=None,
        topic_partitions=(module.TopicPartitions(topic_id=TOPIC_UUID, partitions=(0, 2)),),
    )
    translated = request_to_highwater(kafka(68, version, body))
    request = translated.body
    assert (request.group_id, request.member_id, request.member_epoch) == ("g", "m", 3)
    assert request.rebalance_timeout_ms == 300_000
    assert request.subscribed_topic_names == ("t",)
    assert request.topic_partitions == (TopicPartitions("", (0, 2), TOPIC_ID),)
    ids = _Ids({"t": TOPIC_ID})
    assert named_partitions(request.topic_partitions, ids) == (
        TopicPartitions("t", (0, 2), TOPIC_ID),
    )
    assert named_partitions((TopicPartitions("", (1,), "gone"),), ids) == ()
    assigned = with_partition_ids((TopicPartitions("t", (1,)),), ids)
    response = ConsumerGroupHeartbeatResponse(
        ErrorCode.NONE,
        member_id="m",
        member_epoch=4,
        heartbeat_interval_ms=5000,
        assignment=HeartbeatAssignment(assigned),
    )
    out = response_to_kafka(translated, response)
    assert out.heartbeat_interval == datetime.timedelta(milliseconds=5000)
    (entry,) = out.assignment.topic_partitions
    assert (entry.topic_id, entry.partitions) == (TOPIC_UUID, (1,))
    assert encode_kafka_response(translated.kafka.header, out)


class _Ids:
    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def topic_id(self, name: str) -> str:
        return self.ids.get(name, "")

    def topic_name(self, topic_id: str) -> str | None:
        return {v: k for k, v in self.ids.items()}.get(topic_id)


def test_delete_topics_v6_names_topics_by_name_or_by_id() -> None:
    cls = request_class(20, 6)
    module = __import__(cls.__module__, fromlist=["DeleteTopicState"])
    body = cls(
        topics=(
            module.DeleteTopicState(name="a", topic_id=uuid.UUID(int=0)),
            module.DeleteTopicState(name=None, topic_id=TOPIC_UUID),
        ),
        timeout=datetime.timedelta(milliseconds=3000),
    )
    translated = request_to_highwater(kafka(20, 6, body))
    assert translated.body == DeleteTopicsRequest(("a",), 3000, (TOPIC_ID,))
    response = DeleteTopicsResponse(
        (
            DeletableTopicResult("a", ErrorCode.NONE, topic_id=TOPIC_ID),
            DeletableTopicResult("", ErrorCode.UNKNOWN_TOPIC_ID, "x", "AAAAAAAAAAAAAAAAAAAAAg"),
        )
    )
    out = response_to_kafka(translated, response)
    named, unknown = out.responses
    assert (named.name, named.topic_id) == ("a", TOPIC_UUID)
    assert (unknown.name, unknown.error_code, unknown.topic_id) == (
        None,
        ErrorCode.UNKNOWN_TOPIC_ID,
        uuid.UUID(int=2),
    )
    assert encode_kafka_response(translated.kafka.header, out)
    v5 = request_class(20, 5)(topic_names=("a",), timeout=datetime.timedelta(milliseconds=10))
    assert request_to_highwater(kafka(20, 5, v5)).body == DeleteTopicsRequest(("a",), 10)
