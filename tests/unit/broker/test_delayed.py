"""broker.core.delayed, broker.core.delayed_topics and broker.core.group.runtime: the delayed
operations a purgatory parks (DelayedProduce, DelayedFetch, DelayedCreatePartitions,
DelayedDeleteTopics, the coordinator's DelayedWrite and DelayedLoad), tried and expired by hand
on real logs, as either shell would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.delayed import DelayedFetch, DelayedProduce
from broker.core.delayed_topics import DelayedCreatePartitions, DelayedDeleteTopics
from broker.core.group.coordinator import Decision, GroupCoordinatorCore, GroupSettings
from broker.core.group.model import OffsetValue
from broker.core.group.records import offset_record
from broker.core.group.runtime import DelayedLoad, start_write
from broker.core.group.writes import Load, follow_leadership, replay_batches
from broker.core.isr import IsrCore, IsrSettings
from broker.core.metadata_cache import PartitionInfo
from broker.core.produce import append_produce
from broker.core.replica_manager import ReplicaManager
from broker.core.state import METADATA_KEY, BrokerState
from broker.log.manager import LogManager
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeletableTopicResult
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.topic_partition import OFFSETS_TOPIC, TopicPartition
from tests.unit.log.helpers import T0, make_batch

T0_ = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
OFFSETS_0 = TopicPartition(OFFSETS_TOPIC, 0)


def _led(tp: TopicPartition, leader: int = 1, leader_epoch: int = 0) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        tp.topic, tp.partition, 1, leader, leader_epoch, (1, 2), 0, (1, 2)
    )


@pytest.fixture
def state(tmp_path: Path) -> Iterator[BrokerState]:
    """Broker 1 leads t-0, t-1 and offsets-0, with broker 2 in every ISR: the HW waits for 2."""
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower((_led(T0_), _led(T1), _led(OFFSETS_0)), T0, wall_ms=T0)
    yield BrokerState(replicas, IsrCore(1, IsrSettings(30_000, 5_000, 60_000), T0), 1)
    manager.shutdown(T0)


def _follower_caught_up(state: BrokerState, tp: TopicPartition) -> None:
    partition = state.replica_manager.partitions[tp]
    end = partition.log_end_offset
    assert partition.update_follower_fetch(2, end, end, T0), "the HW should have moved"


def _lose_leadership(state: BrokerState, tp: TopicPartition) -> None:
    state.replica_manager.become_leader_or_follower(
        (_led(tp, leader=2, leader_epoch=1),), T0, wall_ms=T0
    )


def _produce(state: BrokerState, acks: int, *tps: TopicPartition) -> DelayedProduce:
    request = ProduceRequest(
        acks,
        1000,
        tuple(
            ProduceTopicData(tp.topic, (ProducePartitionData(tp.partition, make_batch(2)),))
            for tp in tps
        ),
    )
    return DelayedProduce(request, append_produce(state, request, T0))


def _answers(produce: DelayedProduce) -> list[tuple[int, ErrorCode, int]]:
    return [
        (p.index, ErrorCode(p.error_code), p.base_offset)
        for t in produce.response().responses
        for p in t.partition_responses
    ]


# -- DelayedProduce ----------------------------------------------------------------------


def test_acks_1_completes_at_its_first_try_and_wakes_what_waits_on_its_partition(
    state: BrokerState,
) -> None:
    produce = _produce(state, 1, T0_)
    assert list(produce.take_actions().complete_keys) == [T0_]
    assert list(produce.take_actions().complete_keys) == []  # each action is asked once
    assert produce.watch_keys == []
    assert produce.try_complete(state, T0)
    assert _answers(produce) == [(0, ErrorCode.NONE, 0)]


def test_acks_all_completes_once_the_hw_covers_the_batch(state: BrokerState) -> None:
    produce = _produce(state, -1, T0_)
    assert produce.watch_keys == [T0_]
    assert not produce.try_complete(state, T0)
    assert produce.acked == []
    _follower_caught_up(state, T0_)
    assert produce.try_complete(state, T0)
    assert produce.acked == [T0_]
    assert _answers(produce) == [(0, ErrorCode.NONE, 0)]


def test_acks_all_completes_with_an_error_when_leadership_moves(state: BrokerState) -> None:
    produce = _produce(state, -1, T0_)
    assert not produce.try_complete(state, T0)
    _lose_leadership(state, T0_)
    assert produce.try_complete(state, T0)
    assert produce.acked == []
    assert _answers(produce) == [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]


def test_expiry_times_out_only_the_partitions_still_waiting(state: BrokerState) -> None:
    produce = _produce(state, -1, T0_, T1)
    _follower_caught_up(state, T0_)
    assert not produce.try_complete(state, T0)
    assert produce.watch_keys == [T1]
    produce.expire(T0)
    assert _answers(produce) == [(0, ErrorCode.NONE, 0), (1, ErrorCode.REQUEST_TIMED_OUT, -1)]


# -- DelayedFetch ------------------------------------------------------------------------


def _fetch(min_bytes: int, replica_id: int = -1, offset: int = 0) -> DelayedFetch:
    partitions = (FetchPartition(0, offset, 1 << 20),)
    request = FetchRequest(replica_id, 500, min_bytes, 1 << 20, (FetchTopic("t", partitions),))
    return DelayedFetch(request)


def test_a_fetch_waits_for_min_bytes_and_expires_with_its_last_read(state: BrokerState) -> None:
    fetch = _fetch(min_bytes=1)
    assert fetch.watch_keys == [T0_]
    assert not fetch.try_complete(state, T0)
    fetch.expire(T0)
    [data] = fetch.response().responses[0].partitions
    assert (data.error_code, data.records, data.high_watermark) == (ErrorCode.NONE, b"", 0)


def test_a_fetch_completes_once_the_hw_exposes_enough_bytes(state: BrokerState) -> None:
    fetch = _fetch(min_bytes=1)
    _produce(state, 1, T0_)
    assert not fetch.try_complete(state, T0)  # appended, but not below the HW yet
    _follower_caught_up(state, T0_)
    assert fetch.try_complete(state, T0)
    assert fetch.response().responses[0].partitions[0].records != b""


def test_a_followers_fetch_moves_the_hw_and_asks_to_wake_its_partition(
    state: BrokerState,
) -> None:
    _produce(state, 1, T0_)
    end = state.replica_manager.partitions[T0_].log_end_offset
    fetch = _fetch(min_bytes=1 << 20, replica_id=2, offset=end)
    assert not fetch.try_complete(state, T0)
    assert list(fetch.take_actions().complete_keys) == [T0_]
    assert state.replica_manager.partitions[T0_].high_watermark == end
    assert not fetch.try_complete(state, T0)
    assert list(fetch.take_actions().complete_keys) == []  # the HW did not move again


def test_a_fetch_completes_with_an_error_when_leadership_moves(state: BrokerState) -> None:
    fetch = _fetch(min_bytes=1)
    assert not fetch.try_complete(state, T0)
    _lose_leadership(state, T0_)
    assert fetch.try_complete(state, T0)
    [data] = fetch.response().responses[0].partitions
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- the coordinator's DelayedWrite (broker.core.group.runtime) ---------------------------


def _core() -> GroupCoordinatorCore:
    core = GroupCoordinatorCore(GroupSettings(1, 45_000, 5_000), lambda: "m")
    core.begin_load(0)
    core.finish_load(0, T0)
    return core


def _decision(records: bool = True) -> Decision[str]:
    record = offset_record("g", T0_, OffsetValue(7))
    return Decision(0, "ok", lambda code: code.name, [record] if records else [])


def _committed(core: GroupCoordinatorCore) -> int | None:
    value = core.committed_offsets.get("g", {}).get(T0_)
    return None if value is None else value.offset


def test_a_write_with_no_records_answers_at_once(state: BrokerState) -> None:
    write = start_write(_core(), state, _decision(records=False), T0, 1000)
    assert write.produce is None and write.watch_keys == []
    assert write.try_complete(state, T0)
    assert write.response() == "ok"


def test_a_write_to_a_partition_not_loaded_is_not_coordinator(state: BrokerState) -> None:
    core = _core()
    core.unload(0)
    write = start_write(core, state, _decision(), T0, 1000)
    assert write.try_complete(state, T0)
    assert write.response() == "NOT_COORDINATOR"
    assert state.replica_manager.partitions[OFFSETS_0].log_end_offset == 0


def test_a_write_is_replayed_at_once_and_committed_once_the_hw_covers_it(
    state: BrokerState,
) -> None:
    core = _core()
    write = start_write(core, state, _decision(), T0, 1000)
    assert write.watch_keys == [OFFSETS_0]
    assert list(write.take_actions().complete_keys) == [OFFSETS_0]
    assert not write.try_complete(state, T0)
    assert core.offsets["g"][T0_].offset == 7 and _committed(core) is None
    _follower_caught_up(state, OFFSETS_0)
    assert write.try_complete(state, T0)
    assert write.response() == "ok" and _committed(core) == 7


def test_an_expired_write_answers_its_failure_and_commits_nothing(state: BrokerState) -> None:
    core = _core()
    write = start_write(core, state, _decision(), T0, 1000)
    assert not write.try_complete(state, T0)
    write.expire(T0)
    assert write.response() == "COORDINATOR_NOT_AVAILABLE"  # REQUEST_TIMED_OUT, for a client
    assert _committed(core) is None


# -- the coordinator's DelayedLoad (broker.core.group.runtime) ----------------------------


def _loading(state: BrokerState) -> tuple[GroupCoordinatorCore, DelayedLoad]:
    """A core loading offsets-0, whose log ends past its HW, and its load waiting for the HW."""
    core = GroupCoordinatorCore(GroupSettings(1, 45_000, 5_000), lambda: "m")
    core.leader_epochs[0] = 0
    load_id = core.begin_load(0)
    start_write(_core(), state, _decision(), T0, 1000)  # the previous leader's last write
    partition = state.replica_manager.partitions[OFFSETS_0]
    return core, DelayedLoad(core, 0, load_id, partition, partition.log_end_offset)


def test_a_load_finishes_once_the_hw_covers_what_was_replayed(state: BrokerState) -> None:
    core, load = _loading(state)
    assert load.watch_keys == (OFFSETS_0,)
    assert not load.try_complete(state, T0)
    assert core.check("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    _follower_caught_up(state, OFFSETS_0)
    assert load.try_complete(state, T0)
    assert load.response() and core.check("g") == ErrorCode.NONE
    assert list(load.take_actions().complete_keys) == []


def test_a_load_completes_unloaded_once_leadership_moved_on(state: BrokerState) -> None:
    core, load = _loading(state)
    assert not load.try_complete(state, T0)
    core.leader_epochs[0] = 1  # the coordinator followed a later leadership
    core.begin_load(0)
    _follower_caught_up(state, OFFSETS_0)
    assert load.try_complete(state, T0)
    assert not load.response()
    assert core.check("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # the next load's to finish


def test_an_expired_load_did_not_load(state: BrokerState) -> None:
    core, load = _loading(state)
    assert not load.try_complete(state, T0)
    load.expire(T0)  # only at shutdown: it has no deadline
    assert not load.response()
    assert core.check("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def _replay_one_batch(
    core: GroupCoordinatorCore, load: Load, offset: int, state: BrokerState
) -> int:
    """One step of a shell's load (GroupCoordinator._load): the offset after one batch."""
    assert core.is_current_load(load.partition, load.load_id), "a superseded load replays on"
    log = state.replica_manager.partitions[OFFSETS_0].log
    next_offset, replayed, _ = replay_batches(core, log.read(offset, 1, min_one_batch=True).read())
    assert replayed == 1
    return next_offset


def test_a_reload_at_the_same_leader_epoch_supersedes_the_load_in_progress(
    state: BrokerState,
) -> None:
    """A restarted broker configured with 3 offsets partitions leads offsets-0 of a topic that
    has 1: LeaderAndIsr comes before UpdateMetadata, so load #1 starts under the configured
    count, and the topic's count restarts it, at the same leader epoch. Load #1 must stop
    replaying (else both replay into the core interleaved, an older commit last) and its
    parked DelayedLoad must be woken and end not loaded (else it serves load #2 half
    replayed)."""
    for offset in (7, 8):  # the previous leader's commits, one batch each
        record = offset_record("g", T0_, OffsetValue(offset))
        start_write(_core(), state, Decision(0, "ok", lambda c: c.name, [record]), T0, 1000)
    partition = state.replica_manager.partitions[OFFSETS_0]
    end = partition.log_end_offset
    core = GroupCoordinatorCore(GroupSettings(3, 45_000, 5_000), lambda: "m")
    leadership = follow_leadership(core, state)
    [first] = leadership.loads
    assert first.leader_epoch == 0 and list(leadership.actions.complete_keys) == []
    _replay_one_batch(core, first, 0, state)  # load #1 replays commit 7, then yields
    parked = DelayedLoad(core, 0, first.load_id, partition, end)  # (or parks, all replayed)
    assert not parked.try_complete(state, T0)

    _topic(state, OFFSETS_TOPIC, 1)  # UpdateMetadata: the topic has 1 partition
    leadership = follow_leadership(core, state)
    [second] = leadership.loads
    assert (second.partition, second.leader_epoch) == (0, 0) and second.load_id != first.load_id
    assert list(leadership.actions.complete_keys) == [OFFSETS_0]  # wakes the parked load
    assert not core.is_current_load(0, first.load_id)  # load #1's next step stops it
    assert parked.try_complete(state, T0) and not parked.response()
    assert core.check("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    _follower_caught_up(state, OFFSETS_0)  # the HW covers the log: a stale load must not serve
    offset = _replay_one_batch(core, second, 0, state)
    assert core.check("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # half replayed
    assert _replay_one_batch(core, second, offset, state) == end
    load = DelayedLoad(core, 0, second.load_id, partition, end)
    assert load.try_complete(state, T0) and load.response()
    assert core.check("g") == ErrorCode.NONE and _committed(core) == 8
    assert list(follow_leadership(core, state).actions.complete_keys) == []  # nothing changed


# -- DelayedCreatePartitions and DelayedDeleteTopics (broker.core.delayed_topics) ---------


def _topic(state: BrokerState, name: str, *leaders: int) -> None:
    state.metadata.topics[name] = {
        index: PartitionInfo(leader, 0, (1,), (1,), 0) for index, leader in enumerate(leaders)
    }


def test_created_topics_wait_until_every_partition_has_a_leader(state: BrokerState) -> None:
    waiting = DelayedCreatePartitions({"a": 0, "b": 0})
    assert list(waiting.watch_keys) == [METADATA_KEY]
    assert not waiting.try_complete(state, T0)
    _topic(state, "a", 1, -1)  # one partition without a leader yet
    _topic(state, "b", 2)
    assert not waiting.try_complete(state, T0)
    assert waiting.response() == {"a"}
    _topic(state, "a", 1, 2)
    assert waiting.try_complete(state, T0)
    assert waiting.response() == set()


def test_added_partitions_wait_for_their_count_and_expire_with_the_topics_still_waiting(
    state: BrokerState,
) -> None:
    _topic(state, "a", 1)
    _topic(state, "b", 1)
    waiting = DelayedCreatePartitions({"a": 2, "b": 1})
    assert not waiting.try_complete(state, T0)
    waiting.expire(T0)
    assert waiting.response() == {"a"}
    assert list(waiting.take_actions().complete_keys) == []


def test_deleted_topics_wait_until_gone_and_only_accepted_ones_time_out(
    state: BrokerState,
) -> None:
    for name in ("a", "b", "refused"):
        _topic(state, name, 1)
    refused = DeletableTopicResult("refused", ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no")
    results = {
        "a": DeletableTopicResult("a", ErrorCode.NONE),
        "b": DeletableTopicResult("b", ErrorCode.NONE),
        "refused": refused,
    }
    deletion = DelayedDeleteTopics(results)
    assert list(deletion.watch_keys) == [METADATA_KEY]
    assert not deletion.try_complete(state, T0)
    del state.metadata.topics["a"]
    assert not deletion.try_complete(state, T0)
    deletion.expire(T0)
    assert deletion.response() == {
        "a": DeletableTopicResult("a", ErrorCode.NONE),
        "b": DeletableTopicResult(
            "b", ErrorCode.REQUEST_TIMED_OUT, "deletion requested, not yet complete"
        ),
        "refused": refused,
    }


def test_deleted_topics_complete_once_all_are_gone(state: BrokerState) -> None:
    _topic(state, "a", 1)
    deletion = DelayedDeleteTopics({"a": DeletableTopicResult("a", ErrorCode.NONE)})
    assert not deletion.try_complete(state, T0)
    del state.metadata.topics["a"]
    assert deletion.try_complete(state, T0)
    assert deletion.response() == {"a": DeletableTopicResult("a", ErrorCode.NONE)}
