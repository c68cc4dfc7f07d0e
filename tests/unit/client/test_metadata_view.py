"""The IO-free ListOffsets rounds both the trio clients and the Spark driver use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from client.errors import HighwaterClientError, UnknownTopicError
from client.metadata_view import MetadataView, list_offsets_requests, take_list_offsets
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import MetadataPartition, MetadataResponse, MetadataTopic


def _view() -> MetadataView:
    """t-0 led by 1 (epoch 4), t-1 by 2 (epoch 7), t-2 leaderless; u unknown."""
    view = MetadataView("h:1")
    view.merge(
        MetadataResponse(
            brokers=(BrokerEndpoint(1, "h", 1), BrokerEndpoint(2, "h", 2)),
            cluster_id="c",
            controller_id=1,
            topics=(
                MetadataTopic(
                    0,
                    "t",
                    (
                        MetadataPartition(0, 0, 1, 4, (1, 2), (1, 2)),
                        MetadataPartition(0, 1, 2, 7, (2, 1), (2, 1)),
                        MetadataPartition(ErrorCode.LEADER_NOT_AVAILABLE, 2, -1, 3, (1,), ()),
                    ),
                ),
                MetadataTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "u", ()),
            ),
        ),
        ("t", "u"),
        now_ms=0.0,
    )
    return view


def test_a_round_asks_each_leader_for_its_partitions_with_their_leader_epochs() -> None:
    requests, problem = list_offsets_requests(_view(), {("t", 0): -1, ("t", 1): -2, ("t", 2): -1})
    assert problem == "no leader for t-2"
    assert sorted(requests) == [1, 2]
    assert requests[1].topics[0].partitions == (ListOffsetsPartition(0, -1, 4),)
    assert requests[2].topics[0].partitions == (ListOffsetsPartition(1, -2, 7),)


def test_a_topic_the_cluster_does_not_have_is_an_error_at_once() -> None:
    with pytest.raises(UnknownTopicError):
        list_offsets_requests(_view(), {("u", 0): -1})


def _answer(*partitions: ListOffsetsPartitionResponse) -> ListOffsetsResponse:
    return ListOffsetsResponse((ListOffsetsTopicResponse("t", partitions),))


def test_answers_move_to_results_and_retriable_errors_stay_pending() -> None:
    view = _view()
    view.update_requested = False
    pending = {("t", 0): -1, ("t", 1): -1}
    results: dict[tuple[str, int], tuple[int, int]] = {}
    problem = take_list_offsets(
        view,
        _answer(
            ListOffsetsPartitionResponse(0, 0, timestamp=5, offset=42),
            ListOffsetsPartitionResponse(1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
            ListOffsetsPartitionResponse(9, 0, offset=1),  # not asked for: ignored
        ),
        pending,
        results,
    )
    assert results == {("t", 0): (42, 5)}
    assert pending == {("t", 1): -1}
    assert problem.startswith("NOT_LEADER_OR_FOLLOWER")
    assert view.update_requested  # its leader may have moved


def test_other_errors_are_raised_or_with_partial_dropped() -> None:
    failed = _answer(ListOffsetsPartitionResponse(0, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(HighwaterClientError, match="TOPIC_AUTHORIZATION_FAILED"):
        take_list_offsets(_view(), failed, {("t", 0): -1}, {})
    pending = {("t", 0): -1}
    results: dict[tuple[str, int], tuple[int, int]] = {}
    assert take_list_offsets(_view(), failed, pending, results, partial=True) == ""
    assert (pending, results) == ({}, {})


def test_the_spark_sources_driver_side_does_not_import_trio() -> None:
    """Spark's streaming source runner imports the source in a fresh process before each
    query and waits: trio alone would be about 50 ms of that (docs/spark.md, "Measuring")."""
    code = "import sys, client.spark.source; print(sorted(m for m in sys.modules if 'trio' in m))"
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
