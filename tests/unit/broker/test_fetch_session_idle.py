"""An idle follower's incremental fetch (broker.core.fetch_session with broker.core.fetch): the
partitions nothing changed in are left out of the answer through shortcuts (the session's
read request kept while no request names or forgets a partition; the very same empty answer
object as last time skipped without comparing it); each change the follower must hear of
still names its partition: an append, a HW move, a truncation, a new leader epoch, the
follower's own new position, an error. As a long poll (DelayedFetch tried at once, then at its
deadline): a deadline with no key woken keeps the first read, which the ISR still counts."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from broker.core.delayed import DelayedFetch
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
WAIT_MS = 500  # replica.fetch.wait.max.ms
LAG_MS = 30_000  # replica.lag.time.max.ms (test_fetch_read.leader's IsrSettings)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


class Follower:
    """A follower with one session on the leader `state`, fetching every partition; with
    `long_poll`, each fetch is a DelayedFetch that waits WAIT_MS (as both purgatory drivers
    run it: a try at once, and a last one at the deadline, told whether a key was woken)."""

    def __init__(self, state: BrokerState, long_poll: bool = False) -> None:
        self.state = state
        self.long_poll = long_poll
        self.reads = 0
        self.cache = FetchSessionCache(10)
        self.offsets = {TopicPartition(TOPIC, p): 0 for p in range(PARTITIONS)}
        self.epoch = EPOCH
        self.session_id = 0
        self.session_epoch = INITIAL_EPOCH
        self.now_ms = NOW_MS

    def fetch(
        self,
        named: dict[TopicPartition, int] | None = None,
        during: Callable[[BrokerState], bool] | None = None,
    ) -> FetchResponse:
        """A full fetch first, then incremental ones naming `named` (partition: new offset).
        `during` (long polls): what happens while it waits; True if that woke its keys."""
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
        if self.long_poll:
            response = self._long_poll(context.request, during)
        else:
            response = read_fetch(self.state, context.request, self.now_ms).response
        answer = answer_fetch(context, response)
        assert answer.error_code == ErrorCode.NONE
        self.session_id = answer.session_id
        self.session_epoch += 1
        return answer

    def _long_poll(
        self, request: FetchRequest, during: Callable[[BrokerState], bool] | None
    ) -> FetchResponse:
        fetch = DelayedFetch(request)
        if not self._try(fetch, woken=True):
            woken = during(self.state) if during is not None else False
            self.now_ms += WAIT_MS
            if not self._try(fetch, woken):
                fetch.expire(self.now_ms)
        return fetch.response()

    def _try(self, fetch: DelayedFetch, woken: bool) -> bool:
        before = fetch.read
        done = fetch.try_complete(self.state, self.now_ms, woken)
        fetch.take_actions()
        self.reads += fetch.read is not before
        return done

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
    answer = named(follower.fetch({tp: offset}))
    if not follower.long_poll:
        assert answer == {}
        answer = named(follower.fetch())
    # The HW its own fetch moved: a long poll reads again at its deadline, and tells it.
    assert set(answer) == {tp}
    assert named(follower.fetch()) == {}


@pytest.fixture(params=[False, True], ids=["read", "long-poll"])
def long_poll(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def idle_follower(tmp_path: Path, long_poll: bool = False) -> Follower:
    """A follower whose session is answered and idle: its next fetches name nothing."""
    follower = Follower(leader(tmp_path), long_poll)
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


def test_an_append_names_its_partition(tmp_path: Path, long_poll: bool) -> None:
    follower = idle_follower(tmp_path, long_poll)
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


def test_a_hw_move_by_another_follower_names_the_partition(tmp_path: Path, long_poll: bool) -> None:
    follower = idle_follower(tmp_path, long_poll)
    append(follower.state, P0, 2)
    caught_up(follower, P0, 2)  # the HW waits for no one else (ISR 1, 2)
    partition = follower.state.replica_manager.partitions[P0]
    assert partition.high_watermark == 2
    partition.high_watermark = 1  # a stand-in for any HW change the follower was not told
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].high_watermark == 1


def test_a_log_start_move_names_the_partition(tmp_path: Path, long_poll: bool) -> None:
    follower = idle_follower(tmp_path, long_poll)
    append(follower.state, P0, 3)
    caught_up(follower, P0, 3)
    follower.state.replica_manager.partitions[P0].log.maybe_increment_log_start_offset(2)
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].log_start_offset == 2


def test_a_truncation_names_the_partition_with_an_error(tmp_path: Path, long_poll: bool) -> None:
    follower = idle_follower(tmp_path, long_poll)
    append(follower.state, P0, 3)
    caught_up(follower, P0, 3)
    follower.state.replica_manager.partitions[P0].log.truncate_to(1)
    answer = named(follower.fetch())
    assert set(answer) == {P0} and answer[P0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_new_leader_epoch_names_the_partition_with_an_error(
    tmp_path: Path, long_poll: bool
) -> None:
    follower = idle_follower(tmp_path, long_poll)
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
    tmp_path: Path, lose: Callable[[BrokerState], None], long_poll: bool
) -> None:
    follower = idle_follower(tmp_path, long_poll)
    lose(follower.state)
    for _ in range(2):
        answer = named(follower.fetch())
        assert set(answer) == {P0} and answer[P0].error_code != ErrorCode.NONE


def test_an_idle_long_poll_reads_once_and_keeps_that_answer(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path, long_poll=True)
    reads = follower.reads
    for _ in range(3):
        assert named(follower.fetch()) == {}
    assert follower.reads == reads + 3  # the first try only: no key woke before the deadline
    remote = follower.state.replica_manager.partitions[P0].remotes[FOLLOWER]
    # The follower's state is the first try's, WAIT_MS before the answer.
    assert remote.last_caught_up_time_ms == remote.last_fetch_time_ms == follower.now_ms - WAIT_MS


def _new_epoch(state: BrokerState) -> None:
    state.replica_manager.become_leader_or_follower(
        (
            LeaderAndIsrPartitionState(
                topic_name=TOPIC,
                partition_index=0,
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


def _hw_back(state: BrokerState) -> None:
    state.replica_manager.partitions[P0].high_watermark = 1  # any HW change, as in the test above


CHANGES: dict[str, Callable[[BrokerState], object]] = {
    "append": lambda state: append(state, P0),
    "hw": _hw_back,
    "log-start": lambda state: state.replica_manager.partitions[
        P0
    ].log.maybe_increment_log_start_offset(2),
    "truncation": lambda state: state.replica_manager.partitions[P0].log.truncate_to(1),
    "leader-epoch": _new_epoch,
    "gone": lambda state: state.replica_manager.stop_replica(P0, delete=False),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_that_wakes_a_waiting_fetch_is_in_its_answer(tmp_path: Path, change: str) -> None:
    follower = idle_follower(tmp_path, long_poll=True)
    append(follower.state, P0, 3)
    caught_up(follower, P0, 3)
    reads = follower.reads

    def during(state: BrokerState) -> bool:
        CHANGES[change](state)
        return True  # the shells wake P0's key for each of these changes

    assert set(named(follower.fetch(during=during))) == {P0}
    assert follower.reads == reads + 2  # read again at the deadline: a key woke


def test_a_long_poll_tells_the_hw_its_own_position_moved(tmp_path: Path) -> None:
    follower = idle_follower(tmp_path, long_poll=True)
    append(follower.state, P1, 3)
    assert set(named(follower.fetch())) == {P1}  # the records
    reads = follower.reads
    # Its own fetch at 3 moves the HW after the first read: nothing woke the fetch, but that
    # read moved the HW, so it reads again at the deadline and the answer tells it.
    answer = named(follower.fetch({P1: 3}))
    assert set(answer) == {P1} and answer[P1].high_watermark == 3
    assert follower.reads == reads + 2
    assert named(follower.fetch()) == {}


def test_an_idle_follower_stays_in_the_isr_and_one_that_stops_fetching_leaves(
    tmp_path: Path,
) -> None:
    follower = idle_follower(tmp_path, long_poll=True)
    state = follower.state
    partitions = list(state.replica_manager.partitions.values())
    start_ms = follower.now_ms
    while follower.now_ms < start_ms + 2 * LAG_MS:  # idle long polls, each read once
        assert named(follower.fetch()) == {}
        assert state.isr.shrink(partitions, follower.now_ms) == []
        assert all(p.isr == (LEADER, FOLLOWER) for p in partitions)
    # It stops fetching: out after the lag time, counted from its last read, WAIT_MS before
    # its last answer (the staleness of a long poll read once).
    last_read_ms = follower.now_ms - WAIT_MS
    assert state.isr.shrink(partitions, last_read_ms + LAG_MS) == []
    writes = state.isr.shrink(partitions, last_read_ms + LAG_MS + 1)
    assert sorted(w.tp for w in writes) == sorted(state.replica_manager.partitions)
    assert all(w.znode.isr == (LEADER,) for w in writes)
