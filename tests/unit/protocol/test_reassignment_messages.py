"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): nil replicas (a
cancel) and nil topics (all), through a whole frame."""

from __future__ import annotations

import msgpack

from protocol.apis import ApiKey
from protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
)
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)


def test_kafka_numbers() -> None:
    assert (ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS) == (45, 46)
    assert ErrorCode.NO_REASSIGNMENT_IN_PROGRESS == 85
    assert ErrorCode.INVALID_REPLICA_ASSIGNMENT == 39


def test_alter_round_trip_with_a_cancel() -> None:
    body = AlterPartitionReassignmentsRequest(
        5_000,
        (
            ReassignableTopic(
                "t", (ReassignablePartition(0, (2, 3)), ReassignablePartition(1, None))
            ),
        ),
    )
    frame = encode_request(RequestHeader(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 3), body)
    assert decode_request(frame[4:]).body == body
    plain = msgpack.unpackb(frame[4:], raw=False)[1]
    assert plain["topics"][0]["partitions"][1]["replicas"] is None
    answer = AlterPartitionReassignmentsResponse(
        ErrorCode.NONE,
        responses=(
            ReassignableTopicResponse(
                "t", (ReassignablePartitionResponse(1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),)
            ),
        ),
    )
    raw = encode_response(3, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, answer)
    assert decode_response(raw[4:], ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0).body == answer


def test_list_round_trip() -> None:
    for body in (
        ListPartitionReassignmentsRequest(1_000),
        ListPartitionReassignmentsRequest(1_000, (ListPartitionReassignmentsTopics("t", (0,)),)),
    ):
        frame = encode_request(RequestHeader(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 4), body)
        assert decode_request(frame[4:]).body == body
    answer = ListPartitionReassignmentsResponse(
        ErrorCode.NONE,
        topics=(
            OngoingTopicReassignment(
                "t", (OngoingPartitionReassignment(0, (2, 3, 1), (3,), (1,)),)
            ),
        ),
    )
    raw = encode_response(4, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, answer)
    assert decode_response(raw[4:], ApiKey.LIST_PARTITION_REASSIGNMENTS, 0).body == answer
