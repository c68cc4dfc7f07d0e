"""An idle follower's incremental fetch (broker.core.fetch_session with broker.core.fetch): the
partitions nothing changed in are left out of the answer through shortcuts (the session's
read request kept while no request names or forgets a partition; the very same empty answer
object as last time skipped without comparing it); each change the follower must hear of
still names its partition: an append, a HW move, a truncation, a new leader epoch, the
follower's own new position, an error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from broker.core.fetch import read_fetch
from broker.core.fetch_session import FetchSessionCache, answer_fetch, open_fetch
from broker.core.state import BrokerState
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    INITIAL_EPOCH,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition
from tests.unit.broker.test_fetch_read import EPOCH, LEADER, NOW_MS, PARTITIONS, TOPIC, leader

FOLLOWER = 2
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


class Follower:
    """A follower with one session on the leader `state`, fetching every partition."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.cache = FetchSessionCache(10)
        self.offsets = {TopicPartition(TOPIC, p): 0 for p in range(PARTITIONS)}
        self.epoch = EPOCH
        self.session_id = 0
        self.session_epoch = INITIAL_EPOCH
        self.now_ms = NOW_MS

    def fetch(self, named: dict[TopicPartition, int] | None = None) -> FetchResponse:
        """A full fetch first, then incremental ones naming `named` (partition: new offset)."""
        if self.session_epoch == INITIAL_EPOCH:
            named = dict(self.offsets)
        self.offsets.update(named or {})
        topics = (
            (FetchTopic(TOPIC, tuple(self._entry(tp) for tp in sorted(named))),) if named else ()
        )
        request = FetchRequest(
            FOLLOWER,
            0,
            1,
            1 << 20,
            topics,
            session_id=self.session_id,
            session_epoch=self.session_epoch,
        )
        self.now_ms += 10
        context = open_fetch(self.cache, request, self.now_ms)
        read = read_fetch(self.state, context.request, self.now_ms)
        answer = answer_fetch(context, read.response)
        assert answer.error_code == ErrorCode.NONE
        self.session_id = answer.session_id
        self.session_epoch += 1
        return answer

    def _entry(self, tp: TopicPartition) -> FetchPartition:
        return FetchPartition(tp.partition, self.offsets[tp], 1 << 20, self.epoch)


def named(response: FetchResponse) -> dict[TopicPartition, FetchPartitionData]:
    return {
        TopicPartition(t.topic, p.partition_index): p
        for t in response.responses
        for p in t.partitions
    }


def append(state: BrokerState, tp: TopicPartition, count: int = 1) -> None:
    state.replica_manager.append(tp, build_batch([Record(b"v")] * count, now_ms=NOW_MS), NOW_MS)


def caught_up(follower: Follower, tp: TopicPartition, offset: int) -> None:
    """The follower at `offset`, told the HW that moved, and idle again."""
    follower.fetch({tp: offset})
    assert set(named(follower.fetch())) == {tp}  # the HW its own fetch moved
    assert named(follower.fetch()) == {}


def idle_follower(tmp_path: Path) -> Follower:
    """A follower whose session is answered and idle: its next fetches name nothing."""
    follower = Follower(leader(tmp_path))
    assert set(named(follower.fetch())) == {P0, P1, TopicPartition(TOPIC, 2)}
    assert named(follower.fetch()) == {}
    return follower


def test_an_idle_session_is_answered_with_no_partition_again_and_again(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    before = follower.cache.get(follower.session_id)
    assert before is not None
    read_topics = before.read_topics
    for _ in range(3):
        assert named(follower.fetch()) == {}
    assert before.read_topics is read_topics  # the read request was not built again


def test_an_append_names_its_partition(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    follower.fetch({P0: 0})  # catch up the 0 offset: nothing to read yet
    append(follower.state, P0, 2)
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].records
    assert set(named(follower.fetch())) == {P0}  # still at offset 0: the same records again


def test_the_followers_new_position_is_read_and_its_hw_move_named(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    append(follower.state, P1, 3)
    assert set(named(follower.fetch())) == {P1}  # records at offset 0
    # The follower names its new position (its LEO, 3): that moves the HW to 3 after the
    # read (Kafka's updateFollowerFetchState), so the next answer tells it.
    assert named(follower.fetch({P1: 3})) == {}
    partition = follower.state.replica_manager.partitions[P1]
    assert partition.remotes[FOLLOWER].log_end_offset == 3 and partition.high_watermark == 3
    answer = named(follower.fetch())
    assert set(answer) == {P1} and answer[P1].high_watermark == 3 and not answer[P1].records
    assert named(follower.fetch()) == {}  # at offset 3, not read again at the offset it left
    assert partition.remotes[FOLLOWER].log_end_offset == 3


def test_a_hw_move_by_another_follower_names_the_partition(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    append(follower.state, P0, 2)
    caught_up(follower, P0, 2)  # the HW waits for no one else (ISR 1, 2)
    partition = follower.state.replica_manager.partitions[P0]
    assert partition.high_watermark == 2
    partition.high_watermark = 1  # a stand-in for any HW change the follower was not told
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].high_watermark == 1


def test_a_log_start_move_names_the_partition(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    append(follower.state, P0, 3)
    caught_up(follower, P0, 3)
    follower.state.replica_manager.partitions[P0].log.maybe_increment_log_start_offset(2)
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].log_start_offset == 2


def test_a_truncation_names_the_partition_with_an_error(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    append(follower.state, P0, 3)
    caught_up(follower, P0, 3)
    follower.state.replica_manager.partitions[P0].log.truncate_to(1)
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_new_leader_epoch_names_the_partition_with_an_error(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path)
    follower.state.replica_manager.become_leader_or_follower(
        (
            LeaderAndIsrPartitionState(
                topic_name=TOPIC,
                partition_index=1,
                controller_epoch=1,
                leader=LEADER,
                leader_epoch=EPOCH + 1,
                isr=(LEADER, FOLLOWER),
                partition_epoch=1,
                replicas=(LEADER, FOLLOWER, 3),
            ),
        ),
        NOW_MS,
        wall_ms=NOW_MS,
    )
    answer = named(follower.fetch())
    assert set(answer) == {P1} and answer[P1].error_code == ErrorCode.FENCED_LEADER_EPOCH
    follower.epoch = EPOCH + 1
    assert named(follower.fetch({P1: 0})) == {}  # read in the new epoch: nothing new to say
    append(follower.state, P1)
    answer = named(follower.fetch())
    assert set(answer) == {P1} and answer[P1].records
    assert answer[P1].current_leader_epoch == EPOCH + 1


@pytest.mark.parametrize(
    "lose",
    [
        lambda state: state.replica_manager.stop_replica(P0, delete=False),
        lambda state: setattr(state.replica_manager.partitions[P0], "leader_id", 3),
    ],
    ids=["gone", "not-leader"],
)
def test_an_error_names_the_partition_each_time(
    tmp_path: Path, lose: Callable[[BrokerState], None]
) -> None:
    follower = idle_follower(tmp_path)
    lose(follower.state)
    for _ in range(2):
        answer = named(follower.fetch())
        assert set(answer) == {P0} and answer[P0].error_code != ErrorCode.NONE
