"""The IO-free ListOffsets rounds both the trio clients and the Spark driver use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from client.errors import (
    BrokerConnectionError,
    HighwaterClientError,
    HighwaterTimeoutError,
    UnknownTopicError,
)
from client.metadata_view import (
    AskLeader,
    Backoff,
    ListOffsetsRounds,
    MetadataView,
    RefreshMetadata,
    list_offsets_requests,
    list_offsets_rounds,
    take_list_offsets,
)
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


def _finish(rounds: ListOffsetsRounds, answer: object, now_ms: float) -> object:
    """Send the last answer; the rounds' result (or the next step, if they go on)."""
    try:
        return rounds.send((answer, now_ms))
    except StopIteration as done:
        return done.value


def test_the_rounds_ask_each_leader_and_return_what_they_answer() -> None:
    view = _view()
    view.update_requested = False
    rounds = list_offsets_rounds(view, {("t", 0): -1}, 0.0, timeout_ms=1_000)
    step = next(rounds)
    assert isinstance(step, AskLeader) and step.leader == 1
    answer = _answer(ListOffsetsPartitionResponse(0, 0, timestamp=5, offset=42))
    assert _finish(rounds, answer, 1.0) == {("t", 0): (42, 5)}


def test_no_leader_refreshes_the_metadata_then_backs_off_until_the_deadline() -> None:
    rounds = list_offsets_rounds(_view(), {("t", 2): -1}, 0.0, timeout_ms=250)
    steps = [next(rounds)]
    now_ms = 0.0
    with pytest.raises(HighwaterTimeoutError, match="not done in 250 ms: no leader for t-2"):
        while True:
            step = steps[-1]
            if isinstance(step, Backoff):
                now_ms += step.delay_ms
            steps.append(rounds.send((None, now_ms)))
    assert [type(s) for s in steps] == [
        RefreshMetadata, Backoff, RefreshMetadata, Backoff, RefreshMetadata, Backoff,
        RefreshMetadata,
    ]  # fmt: skip
    assert steps[0] == RefreshMetadata(("t",))
    assert [s.delay_ms for s in steps if isinstance(s, Backoff)] == [100, 100, 50]


def test_a_connection_error_asks_for_new_metadata_and_tries_again() -> None:
    view = _view()
    view.update_requested = False
    rounds = list_offsets_rounds(view, {("t", 1): -2}, 0.0, timeout_ms=1_000)
    assert isinstance(next(rounds), AskLeader)
    assert rounds.send((BrokerConnectionError("cannot connect"), 1.0)) == Backoff(100)
    assert view.update_requested
    assert rounds.send((None, 101.0)) == RefreshMetadata(("t",))
    step = rounds.send((None, 102.0))
    assert isinstance(step, AskLeader) and step.leader == 2
    answer = _answer(ListOffsetsPartitionResponse(1, 0, timestamp=-1, offset=7))
    assert _finish(rounds, answer, 103.0) == {("t", 1): (7, -1)}


def test_partial_rounds_stop_after_one_round_with_what_succeeded() -> None:
    view = _view()
    view.update_requested = False
    rounds = list_offsets_rounds(
        view, {("t", 0): -1, ("t", 1): -1}, 0.0, timeout_ms=1_000, partial=True
    )
    first = next(rounds)
    assert isinstance(first, AskLeader)
    second = rounds.send((_answer(ListOffsetsPartitionResponse(0, 0, offset=3)), 1.0))
    assert isinstance(second, AskLeader)
    failed = _answer(ListOffsetsPartitionResponse(1, ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert _finish(rounds, failed, 2.0) == {("t", 0): (3, -1)}


def test_nothing_to_ask_is_an_empty_answer_at_once() -> None:
    with pytest.raises(StopIteration) as done:
        next(list_offsets_rounds(_view(), {}, 0.0, timeout_ms=1))
    assert done.value.value == {}


def test_the_spark_sources_driver_side_imports_no_trio_ssl_or_sasl() -> None:
    """Spark's streaming source runner imports the source in a fresh process before each
    query and waits: trio alone would be about 50 ms of that, ssl about 10 (docs/spark.md,
    "Measuring"). A PLAINTEXT source needs none of them, nor the SASL messages."""
    code = (
        "import sys, client.spark.source; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'ssl', '_ssl') "
        "or m.startswith('protocol.messages.sasl')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
