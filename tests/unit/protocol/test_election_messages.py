"""ElectLeaders (43) and CreatePartitions (37): the cases the generic round trip may not pick
(nil lists, Kafka's numbers), through a whole frame."""

from __future__ import annotations

import msgpack
import pytest

from protocol.apis import ApiKey
from protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
    ReplicaElectionResult,
    TopicPartitions,
)


def test_kafka_numbers() -> None:
    assert (ApiKey.CREATE_PARTITIONS, ApiKey.ELECT_LEADERS) == (37, 43)
    assert (ElectionType.PREFERRED, ElectionType.UNCLEAN) == (0, 1)
    assert ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE == 80
    assert ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE == 83
    assert ErrorCode.ELECTION_NOT_NEEDED == 84


@pytest.mark.parametrize(
    "body",
    [
        ElectLeadersRequest(ElectionType.PREFERRED, None, 5_000),
        ElectLeadersRequest(ElectionType.UNCLEAN, (TopicPartitions("t", (0, 3)),), 1),
        CreatePartitionsRequest((CreatePartitionsTopic("t", 6),), 30_000),
        CreatePartitionsRequest(
            (CreatePartitionsTopic("t", 3, (CreatePartitionsAssignment((2, 1)),)),), 0, True
        ),
    ],
)
def test_requests_round_trip(body: object) -> None:
    key = (
        ApiKey.ELECT_LEADERS if isinstance(body, ElectLeadersRequest) else ApiKey.CREATE_PARTITIONS
    )
    header = RequestHeader(key, 0, 7, "admin")
    frame = encode_request(header, body)
    assert decode_request(frame[4:]).body == body


def test_nil_topic_partitions_is_nil_on_the_wire() -> None:
    header = RequestHeader(ApiKey.ELECT_LEADERS, 0, 1)
    frame = encode_request(header, ElectLeadersRequest(ElectionType.PREFERRED, None, 10))
    plain = msgpack.unpackb(frame[4:], raw=False)[1]
    assert plain == {"election_type": 0, "topic_partitions": None, "timeout_ms": 10}


def test_responses_round_trip() -> None:
    elect = ElectLeadersResponse(
        ErrorCode.NONE,
        (
            ReplicaElectionResult(
                "t",
                (
                    PartitionElectionResult(0, ErrorCode.NONE),
                    PartitionElectionResult(1, ErrorCode.ELECTION_NOT_NEEDED, "already"),
                ),
            ),
        ),
    )
    raw = encode_response(9, ApiKey.ELECT_LEADERS, 0, elect)
    assert decode_response(raw[4:], ApiKey.ELECT_LEADERS, 0).body == elect
    grow = CreatePartitionsResponse(
        (CreatePartitionsTopicResult("t", ErrorCode.INVALID_PARTITIONS, "only add"),)
    )
    raw = encode_response(9, ApiKey.CREATE_PARTITIONS, 0, grow)
    assert decode_response(raw[4:], ApiKey.CREATE_PARTITIONS, 0).body == grow
