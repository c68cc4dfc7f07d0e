"""Fetch sessions (KIP-227): the broker's cache (broker.core.fetch_session) and the client's
handler (protocol.fetch_session), alone and talking to each other."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from broker.core.fetch import read_fetch
from broker.core.fetch_session import (
    EVICTION_MS,
    IN_PROCESS,
    FetchSessionCache,
    SessionOwner,
    answer_fetch,
    open_fetch,
)
from broker.core.follower import FetcherSettings, FetchRound, Follower
from broker.core.principal import Principal
from broker.core.replication_quota import ReplicationQuota
from protocol.errors import ErrorCode
from protocol.fetch_session import FetchSessionHandler, fetch_entry, next_epoch
from protocol.messages.common import BrokerEndpoint
from protocol.messages.fetch import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResponse,
    ForgottenTopic,
)
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition
from tests.benchmarks import fetch_cost

FOLLOWER = 2
CONSUMER = -1
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def fetch(tp: TopicPartition, offset: int = 0, epoch: int = 0) -> FetchPartition:
    return FetchPartition(tp.partition, offset, 1 << 20, current_leader_epoch=epoch)


def request(
    wanted: dict[TopicPartition, FetchPartition],
    session_id: int = 0,
    epoch: int = INITIAL_EPOCH,
    replica_id: int = FOLLOWER,
    forgotten: tuple[ForgottenTopic, ...] = (),
) -> FetchRequest:
    by_topic: dict[str, list[FetchPartition]] = {}
    for tp, f in wanted.items():
        by_topic.setdefault(tp.topic, []).append(f)
    return FetchRequest(
        replica_id,
        500,
        1,
        1 << 20,
        tuple(FetchTopic(t, tuple(ps)) for t, ps in by_topic.items()),
        session_id=session_id,
        session_epoch=epoch,
        forgotten_topics_data=forgotten,
    )


def read(req: FetchRequest, leader: dict[TopicPartition, tuple[int, bytes]]) -> FetchResponse:
    """What read_fetch would answer: every partition asked, HW and records from `leader`."""
    topics = []
    for topic in req.topics:
        parts = []
        for f in topic.partitions:
            hw, records = leader.get(TopicPartition(topic.topic, f.partition), (0, b""))
            parts.append(FetchPartitionData(f.partition, ErrorCode.NONE, hw, 0, records))
        topics.append(FetchTopicResponse(topic.topic, tuple(parts)))
    return FetchResponse(ErrorCode.NONE, tuple(topics))


def named(response: FetchResponse) -> set[TopicPartition]:
    return {
        TopicPartition(t.topic, p.partition_index) for t in response.responses for p in t.partitions
    }


def test_a_full_request_opens_a_session_and_names_every_partition() -> None:
    cache = FetchSessionCache(10, lambda: 7)
    context = open_fetch(cache, request({A0: fetch(A0), B0: fetch(B0)}), 0)
    answer = answer_fetch(context, read(context.request, {}))
    assert answer.session_id == 7 and named(answer) == {A0, B0}
    assert cache.get(7) is not None and cache.get(7).epoch == 1  # type: ignore[union-attr]


def test_an_incremental_request_reads_the_whole_session_but_names_only_news() -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0), A1: fetch(A1), B0: fetch(B0)}), 0)
    sid = answer_fetch(first, read(first.request, {})).session_id
    # Nothing named: every partition of the session is read at its cached offset.
    context = open_fetch(cache, request({}, sid, 1), 1)
    assert context.incremental and context.error == ErrorCode.NONE
    assert {(t.topic, p.partition) for t in context.request.topics for p in t.partitions} == {
        ("a", 0),
        ("a", 1),
        ("b", 0),
    }
    answer = answer_fetch(context, read(context.request, {A1: (0, b"x"), B0: (5, b"")}))
    assert named(answer) == {A1, B0}  # records; a high watermark moved. A0 has nothing new
    again = open_fetch(cache, request({}, sid, 2), 2)
    assert named(answer_fetch(again, read(again.request, {B0: (5, b"")}))) == set()


@pytest.mark.parametrize(
    "change",
    [
        FetchPartitionData(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, b""),
        FetchPartitionData(0, ErrorCode.NONE, 0, 3, b""),  # log start moved
    ],
)
def test_errors_and_a_moved_log_start_are_always_named(change: FetchPartitionData) -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0)}), 0)
    sid = answer_fetch(first, read(first.request, {})).session_id
    context = open_fetch(cache, request({}, sid, 1), 1)
    response = FetchResponse(ErrorCode.NONE, (FetchTopicResponse("a", (change,)),))
    assert named(answer_fetch(context, response)) == {A0}


def test_updates_and_forgotten_partitions_change_the_session() -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0), B0: fetch(B0)}), 0)
    sid = answer_fetch(first, read(first.request, {})).session_id
    context = open_fetch(
        cache,
        request({A0: fetch(A0, 9), A1: fetch(A1)}, sid, 1, forgotten=(ForgottenTopic("b", (0,)),)),
        1,
    )
    session = cache.get(sid)
    assert session is not None
    assert {tp: c.fetch.fetch_offset for tp, c in session.partitions.items()} == {A0: 9, A1: 0}
    assert named(answer_fetch(context, read(context.request, {}))) == {A1}  # new: named once


def test_a_session_survives_a_new_leader_epoch() -> None:
    """A follower whose partition's leader epoch changed names it with the new epoch; the
    session goes on (Kafka resets nothing for that), and the partition is read in it."""
    cache = FetchSessionCache(10)
    handler = FetchSessionHandler()
    wanted = {A0: fetch(A0, 5, epoch=1), B0: fetch(B0, 0, epoch=1)}
    plan = handler.build(wanted)
    context = open_fetch(cache, request_of(plan), 0)
    handler.handle_response(answer_fetch(context, read(context.request, {})))
    wanted[A0] = fetch(A0, 5, epoch=2)
    plan = handler.build(wanted)
    assert not plan.full and [
        p.current_leader_epoch for t in plan.topics for p in t.partitions
    ] == [2]
    context = open_fetch(cache, request_of(plan), 1)
    assert context.error == ErrorCode.NONE
    handler.handle_response(answer_fetch(context, read(context.request, {A0: (6, b"r")})))
    session = cache.get(handler.session_id)
    assert session is not None and session.partitions[A0].fetch.current_leader_epoch == 2
    assert handler.incremental and handler.epoch == 2


def test_unknown_foreign_and_out_of_order_sessions_are_refused() -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0)}), 0)
    sid = answer_fetch(first, read(first.request, {})).session_id
    for req, code in (
        (request({}, sid + 1, 1), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (request({}, sid, 1, replica_id=CONSUMER), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (request({}, sid, 2), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
    ):
        context = open_fetch(cache, req, 1)
        assert context.error == code
        answer = answer_fetch(context, FetchResponse(context.error, ()))
        assert answer.error_code == code and answer.responses == () and answer.session_id == 0
    assert cache.get(sid) is not None and cache.get(sid).epoch == 1  # type: ignore[union-attr]


def test_session_ids_are_random_nonzero_int32s_and_never_reused_while_live() -> None:
    """Drawn from `secrets`, not counted up: a client cannot guess the next one from its own."""
    cache = FetchSessionCache(1000)
    ids = [
        answer_fetch(c, read(c.request, {})).session_id
        for c in (open_fetch(cache, request({A0: fetch(A0)}), at) for at in range(50))
    ]
    assert all(0 < sid <= 2**31 - 1 for sid in ids) and len(set(ids)) == 50
    assert not any(b - a == 1 for a, b in itertools.pairwise(ids))
    draws = iter([0, 5, 2**31, 5, 6])  # invalid, taken and out-of-range draws are drawn again
    drawing = FetchSessionCache(10, lambda: next(draws))
    assert [
        open_fetch(drawing, request({A0: fetch(A0)}), 0).session.session_id  # type: ignore[union-attr]
        for _ in range(2)
    ] == [5, 6]


ALICE = SessionOwner(Principal("User", "alice"), "CLIENT")
MALLORY = SessionOwner(Principal("User", "mallory"), "CLIENT")


def test_only_the_principal_and_listener_that_opened_a_session_may_use_or_close_it() -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0)}, replica_id=CONSUMER), 0, ALICE)
    sid = answer_fetch(first, read(first.request, {})).session_id
    elsewhere = SessionOwner(ALICE.principal, "INTERNAL")
    for stranger in (MALLORY, elsewhere, IN_PROCESS):
        refused = open_fetch(cache, request({}, sid, 1, replica_id=CONSUMER), 1, stranger)
        assert refused.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # A full request naming it (to close it) opens the stranger's own and leaves it be.
        full = open_fetch(
            cache, request({B0: fetch(B0)}, sid, INITIAL_EPOCH, CONSUMER), 1, stranger
        )
        assert full.session is not None and full.session.session_id != sid
        open_fetch(cache, request({}, sid, FINAL_EPOCH, replica_id=CONSUMER), 1, stranger)
    assert cache.get(sid) is None  # to a stranger (IN_PROCESS) it does not exist
    mine = open_fetch(cache, request({}, sid, 1, replica_id=CONSUMER), 2, ALICE)
    assert mine.error == ErrorCode.NONE and mine.incremental
    assert named(answer_fetch(mine, read(mine.request, {A0: (0, b"x")}))) == {A0}
    open_fetch(cache, request({}, sid, FINAL_EPOCH, replica_id=CONSUMER), 3, ALICE)
    assert cache.get(sid, ALICE) is None


def test_final_epoch_closes_the_session_and_fetches_without_one() -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0)}), 0)
    sid = answer_fetch(first, read(first.request, {})).session_id
    context = open_fetch(cache, request({A0: fetch(A0)}, sid, FINAL_EPOCH), 1)
    answer = answer_fetch(context, read(context.request, {}))
    assert cache.get(sid) is None and answer.session_id == 0 and named(answer) == {A0}


def test_a_full_cache_evicts_stale_then_consumer_sessions_never_a_live_followers() -> None:
    cache = FetchSessionCache(1)
    open_fetch(cache, request({A0: fetch(A0)}, replica_id=FOLLOWER), 0)
    # A live follower's session stays; the newcomer fetches without one.
    assert open_fetch(cache, request({A0: fetch(A0)}, replica_id=3), 1).session is None
    # Unused for EVICTION_MS, it makes way.
    assert open_fetch(cache, request({A0: fetch(A0)}, replica_id=3), EVICTION_MS).session
    consumer = FetchSessionCache(1)
    open_fetch(consumer, request({A0: fetch(A0)}, replica_id=CONSUMER), 0)
    small = open_fetch(consumer, request({A0: fetch(A0)}, replica_id=CONSUMER), 1)
    assert small.session is None  # not larger: no eviction
    assert open_fetch(consumer, request({A0: fetch(A0)}, replica_id=FOLLOWER), 2).session


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(1) == 2 and next_epoch(2**31 - 1) == 1


def test_the_handler_starts_over_after_an_error() -> None:
    handler = FetchSessionHandler()
    handler.build({A0: fetch(A0)})
    handler.handle_response(FetchResponse(ErrorCode.NONE, (), session_id=4))
    assert handler.incremental and handler.session_id == 4
    handler.build({A0: fetch(A0)})
    handler.handle_response(FetchResponse(ErrorCode.INVALID_FETCH_SESSION_EPOCH, ()))
    plan = handler.build({A0: fetch(A0)})
    assert plan.full and plan.session_id == 4  # closes the old one while opening a new one
    handler.handle_error()
    assert handler.build({A0: fetch(A0)}).full


def request_of(plan: object) -> FetchRequest:
    from protocol.fetch_session import FetchPlan

    assert isinstance(plan, FetchPlan)
    return FetchRequest(
        FOLLOWER,
        500,
        1,
        1 << 20,
        plan.topics,
        session_id=plan.session_id,
        session_epoch=plan.session_epoch,
        forgotten_topics_data=plan.forgotten,
    )


@pytest.mark.parametrize("seed", range(40))
def test_a_session_never_hides_a_partitions_news(seed: int) -> None:
    """A follower and a leader talk through a session while the leader's partitions get
    records and new high watermarks, partitions join and leave, epochs change, answers are
    lost and the cache evicts. After every answer the follower knows every wanted
    partition's high watermark and has every record from its fetch offset."""
    rng = random.Random(seed)
    cache = FetchSessionCache(rng.choice((1, 1000)))
    handler = FetchSessionHandler()
    tps = [TopicPartition(t, p) for t in "abc" for p in range(3)]
    log_end = {tp: 0 for tp in tps}  # the leader's
    hw = {tp: 0 for tp in tps}
    fetched = {tp: 0 for tp in tps}  # the follower's LEO
    known_hw = {tp: -1 for tp in tps}
    epoch = {tp: 0 for tp in tps}
    wanted_set = set(rng.sample(tps, 4))
    now_ms = 0
    for _ in range(200):
        now_ms += rng.randint(0, EVICTION_MS // 10)
        for tp in rng.sample(tps, 2):
            log_end[tp] += rng.randint(0, 3)
            hw[tp] = rng.randint(hw[tp], log_end[tp])
        if rng.random() < 0.1:
            wanted_set ^= {rng.choice(tps)}
        if rng.random() < 0.05:
            tp = rng.choice(tps)
            epoch[tp] += 1
        if rng.random() < 0.05:  # another follower takes the only slot, or not
            open_fetch(cache, request({tps[0]: fetch(tps[0])}, replica_id=3), now_ms)
        wanted = {tp: fetch(tp, fetched[tp], epoch[tp]) for tp in sorted(wanted_set)}
        if not wanted:
            continue
        plan = handler.build(wanted)
        context = open_fetch(cache, request_of(plan), now_ms)
        full = FetchResponse(ErrorCode.NONE, ())
        if context.error == ErrorCode.NONE:
            topics = []
            for topic in context.request.topics:
                parts = []
                for f in topic.partitions:
                    tp = TopicPartition(topic.topic, f.partition)
                    records = b"r" * (log_end[tp] - f.fetch_offset)
                    parts.append(FetchPartitionData(f.partition, 0, hw[tp], 0, records))
                topics.append(FetchTopicResponse(topic.topic, tuple(parts)))
            full = FetchResponse(ErrorCode.NONE, tuple(topics))
        answer = answer_fetch(context, full)
        if rng.random() < 0.05:  # the answer is lost
            handler.handle_error()
            continue
        handler.handle_response(answer)
        if answer.error_code != ErrorCode.NONE:
            continue
        for topic in answer.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                assert tp in wanted, f"named {tp}, not wanted"
                fetched[tp] += len(data.records)
                known_hw[tp] = data.high_watermark
        for tp in wanted:
            assert fetched[tp] == log_end[tp], f"seed {seed}: {tp} missed records"
            assert known_hw[tp] == hw[tp], f"seed {seed}: {tp} missed a high watermark"


def test_a_partition_named_twice_does_not_hide_another() -> None:
    cache = FetchSessionCache(10)
    first = open_fetch(cache, request({A0: fetch(A0), A1: fetch(A1)}), 0)
    sid = answer_fetch(first, read(first.request, {})).session_id
    twice = FetchRequest(
        FOLLOWER, 500, 1, 1 << 20, (FetchTopic("a", (fetch(A0, 1), fetch(A0, 1))),),
        session_id=sid, session_epoch=1,
    )  # fmt: skip
    context = open_fetch(cache, twice, 1)
    read_now = {(t.topic, p.partition) for t in context.request.topics for p in t.partitions}
    assert read_now == {("a", 0), ("a", 1)}


def test_the_fetch_cost_benchmark_replicates(tmp_path: Path) -> None:
    """tests/benchmarks/fetch_cost.py's leader and follower cores stay in step (it asserts
    the follower caught up), with sessions on and off."""
    for slots in (0, 1000):
        assert fetch_cost.cpu_per_round_us(tmp_path / str(slots), 3, slots, 10) > 0


def test_a_follower_reuses_an_idle_partitions_entry_and_asks_anew_when_it_moved(
    tmp_path: Path,
) -> None:
    """Follower.poll builds a partition's FetchPartition again only when what it asks for
    changed; the session then names exactly the partitions whose entry changed."""
    now_ms = fetch_cost.NOW_MS
    leader = fetch_cost.broker(fetch_cost.LEADER, tmp_path / "leader", 3, 1000)
    mine = fetch_cost.broker(fetch_cost.FOLLOWER, tmp_path / "follower", 3, 1000)
    follower = Follower(
        mine,
        FetcherSettings(1 << 20, 1, 500, 1000, 30_000),
        BrokerEndpoint(fetch_cost.LEADER, "127.0.0.1", 9092),
        ReplicationQuota(),
    )
    for tp in mine.replica_manager.partitions:
        follower.add(tp, 0)
        follower.partitions[tp].truncating = False
    busy = TopicPartition("t", 0)

    def one_round(at_ms: int) -> FetchRequest:
        sent = follower.poll(at_ms)
        assert isinstance(sent, FetchRound)
        context = open_fetch(leader.fetch_sessions, sent.request, at_ms)
        answer = answer_fetch(context, read_fetch(leader, context.request, at_ms).response)
        follower.on_response(sent, answer, at_ms, wall_ms=at_ms)
        return sent.request

    one_round(now_ms)  # opens the session
    before = {tp: s.wanted for tp, s in follower.partitions.items()}
    assert named_in(one_round(now_ms + 1)) == set()  # nothing changed: nothing named
    assert all(s.wanted is before[tp] for tp, s in follower.partitions.items())

    leader.replica_manager.append(busy, build_batch([Record(b"x")], now_ms=now_ms), now_ms)
    one_round(now_ms + 2)  # the record arrives
    request = one_round(now_ms + 3)  # the next fetch asks from past it
    assert named_in(request) == {busy}
    moved = follower.partitions[busy].wanted
    assert moved is not before[busy] and moved is not None and moved.fetch_offset == 1
    assert all(s.wanted is before[tp] for tp, s in follower.partitions.items() if tp != busy)


def named_in(req: FetchRequest) -> set[TopicPartition]:
    return {TopicPartition(t.topic, p.partition) for t in req.topics for p in t.partitions}


@pytest.mark.parametrize(
    "change",
    [
        {"fetch_offset": 8},
        {"max_bytes": 2048},
        {"leader_epoch": 4},
        {"log_start_offset": 1},
    ],
)
def test_a_fetch_entry_is_reused_until_something_it_asks_changes(change: dict[str, int]) -> None:
    asked = {"fetch_offset": 7, "max_bytes": 1024, "leader_epoch": 3, "log_start_offset": 0}
    last = fetch_entry(None, 5, **asked)
    assert fetch_entry(last, 5, **asked) is last
    moved = fetch_entry(last, 5, **{**asked, **change})
    assert moved is not last
    assert moved == FetchPartition(
        5,
        change.get("fetch_offset", 7),
        change.get("max_bytes", 1024),
        current_leader_epoch=change.get("leader_epoch", 3),
        log_start_offset=change.get("log_start_offset", 0),
    )
