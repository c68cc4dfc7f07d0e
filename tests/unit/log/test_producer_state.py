"""Producer state (KIP-98 idempotence): duplicates, sequence and epoch checks, follower updates,
expiry, and that checking an append never changes the state."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.producer_state import (
    MAX_CACHED_BATCHES,
    MAX_SEQUENCE,
    BatchMetadata,
    DuplicateBatch,
    ProducerStateEntry,
    ProducerStateManager,
)
from protocol.errors import (
    ErrorCode,
    HighwaterError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
)
from protocol.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    Record,
    build_batch,
    read_header,
)

T0 = 1_700_000_000_000
PID = 1000


def hdr(
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    *,
    offset: int = 0,
    ts: int = T0,
) -> BatchHeader:
    """A producer batch header as the broker parses it (offset 0 until the leader assigns)."""
    return BatchHeader(
        base_offset=offset,
        batch_length=100,
        partition_leader_epoch=-1,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=ts,
        max_timestamp=ts + count - 1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=count,
    )


def plain(count: int = 1) -> BatchHeader:
    """A batch from a producer that is not idempotent."""
    return hdr(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, count)


def leader_append(m: ProducerStateManager, *headers: BatchHeader) -> DuplicateBatch | None:
    """What the Log does on a leader append: check, then assign offsets and apply each batch."""
    duplicate = m.check_leader_append(headers)
    if duplicate is None:
        for h in headers:
            m.update(h._replace(base_offset=m.map_end_offset))
    return duplicate


def state(m: ProducerStateManager) -> tuple[object, ...]:
    return (m.snapshot_entries(), m.map_end_offset)


def code_of(m: ProducerStateManager, *headers: BatchHeader) -> ErrorCode:
    with pytest.raises(HighwaterError) as info:
        m.check_leader_append(headers)
    return info.value.code


@pytest.fixture
def seven() -> ProducerStateManager:
    """Producer PID, epoch 0, seven batches of 2 records: sequences 0-1, 2-3, ..., 12-13 at
    offsets 0-1, 2-3, ..., 12-13 (the first two are out of the window)."""
    m = ProducerStateManager()
    for i in range(7):
        assert leader_append(m, hdr(seq=2 * i, count=2, ts=T0 + i)) is None
    return m


# --- duplicates -------------------------------------------------------------------------------


@pytest.mark.parametrize("i", range(2, 7))
def test_resend_of_each_cached_batch_returns_its_original_offsets(
    seven: ProducerStateManager, i: int
) -> None:
    before = state(seven)
    duplicate = seven.check_leader_append([hdr(seq=2 * i, count=2, ts=T0 + i)])
    assert duplicate == DuplicateBatch(
        first_offset=2 * i, last_offset=2 * i + 1, max_timestamp=T0 + i + 1
    )
    assert state(seven) == before


@pytest.mark.parametrize("i", [0, 1])
def test_batch_older_than_the_window_is_out_of_order(seven: ProducerStateManager, i: int) -> None:
    assert len(seven.producers[PID].batches) == MAX_CACHED_BATCHES
    assert code_of(seven, hdr(seq=2 * i, count=2)) == 45  # the wire number


def test_duplicate_needs_the_same_sequence_range(seven: ProducerStateManager) -> None:
    # Same first sequence, different length: not a duplicate, and not in sequence either.
    assert code_of(seven, hdr(seq=12, count=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(seven, hdr(seq=12, count=3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_duplicate_needs_the_same_epoch(seven: ProducerStateManager) -> None:
    assert leader_append(seven, hdr(epoch=1, seq=0, count=2)) is None
    # Sequences 12-13 of epoch 0 are gone with the epoch: now fenced, not a duplicate.
    assert code_of(seven, hdr(epoch=0, seq=12, count=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert seven.check_leader_append([hdr(epoch=1, seq=0, count=2)]) == DuplicateBatch(
        14, 15, T0 + 1
    )
    # The same sequence range in another epoch: fenced, or a new epoch's first batch.
    assert code_of(seven, hdr(epoch=0, seq=0, count=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert seven.check_leader_append([hdr(epoch=2, seq=0, count=2)]) is None


# --- sequence and epoch checks ----------------------------------------------------------------


def test_next_sequence_is_accepted(seven: ProducerStateManager) -> None:
    assert seven.check_leader_append([hdr(seq=14, count=3)]) is None


@pytest.mark.parametrize("seq", [15, 16, 100, 13, 11, MAX_SEQUENCE])
def test_sequence_gap_or_repeat_is_out_of_order(seven: ProducerStateManager, seq: int) -> None:
    with pytest.raises(OutOfOrderSequenceError) as info:
        seven.check_leader_append([hdr(seq=seq)])
    assert info.value.code == 45
    assert str(PID) in str(info.value)


@pytest.mark.parametrize("seq", [0, 14, 12])
def test_older_epoch_is_fenced(seq: int) -> None:
    m = ProducerStateManager()
    leader_append(m, hdr(epoch=3, seq=0, count=14))
    with pytest.raises(InvalidProducerEpochError) as info:
        m.check_leader_append([hdr(epoch=2, seq=seq)])
    assert info.value.code == 47  # the wire number


def test_new_epoch_must_start_at_zero(seven: ProducerStateManager) -> None:
    assert seven.check_leader_append([hdr(epoch=1, seq=0)]) is None
    assert seven.check_leader_append([hdr(epoch=5, seq=0)]) is None
    assert code_of(seven, hdr(epoch=1, seq=7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(seven, hdr(epoch=1, seq=14)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_new_epoch_clears_the_batches_on_append(seven: ProducerStateManager) -> None:
    leader_append(seven, hdr(epoch=1, seq=0, count=2))
    entry = seven.producers[PID]
    assert entry.producer_epoch == 1
    assert list(entry.batches) == [BatchMetadata(0, 1, 14, 15, T0 + 1)]
    assert seven.check_leader_append([hdr(epoch=1, seq=2)]) is None


@given(
    seq=st.integers(0, MAX_SEQUENCE),
    epoch=st.integers(0, 2**15 - 1),
    count=st.integers(1, 1000),
)
def test_unknown_producer_is_accepted_at_any_sequence(seq: int, epoch: int, count: int) -> None:
    m = ProducerStateManager()
    leader_append(m, hdr(pid=7, seq=0, count=3))  # another producer: PID stays unknown
    assert m.check_leader_append([hdr(epoch=epoch, seq=seq, count=count)]) is None


def test_sequence_wraps_from_max_to_zero() -> None:
    m = ProducerStateManager()
    leader_append(m, hdr(seq=MAX_SEQUENCE - 1, count=2))
    assert m.producers[PID].last_seq == MAX_SEQUENCE
    assert code_of(m, hdr(seq=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader_append(m, hdr(seq=0, count=2)) is None
    assert m.check_leader_append([hdr(seq=2)]) is None


def test_batch_spanning_the_wrap_is_followed_and_deduplicated() -> None:
    m = ProducerStateManager()
    leader_append(m, hdr(seq=MAX_SEQUENCE - 2, count=2))
    spanning = hdr(seq=MAX_SEQUENCE, count=3)  # sequences MAX, 0, 1
    assert leader_append(m, spanning) is None
    assert m.producers[PID].last_seq == 1
    assert m.check_leader_append([spanning]) == DuplicateBatch(2, 4, T0 + 2)
    assert m.check_leader_append([hdr(seq=2)]) is None
    assert code_of(m, hdr(seq=0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize(
    "bad",
    [
        hdr(seq=20),  # gap
        hdr(epoch=0, seq=0, count=14),  # repeat of sequences 0-13 as one batch
        hdr(epoch=2, seq=3),  # new epoch not at 0
        hdr(epoch=-1, seq=3),  # older epoch
        hdr(seq=-1),  # producer id without a sequence
    ],
)
def test_rejected_batch_changes_nothing(seven: ProducerStateManager, bad: BatchHeader) -> None:
    before = state(seven)
    with pytest.raises(HighwaterError):
        seven.check_leader_append([hdr(seq=14), bad])  # a good batch first: not kept either
    assert state(seven) == before
    assert seven.check_leader_append([hdr(seq=14)]) is None


def test_producer_id_without_epoch_or_sequence_is_an_invalid_record() -> None:
    m = ProducerStateManager()
    with pytest.raises(InvalidRecordError) as info:
        m.check_leader_append([hdr(seq=NO_SEQUENCE)])
    assert info.value.code == 87
    assert code_of(m, hdr(epoch=NO_PRODUCER_EPOCH, seq=0)) == ErrorCode.INVALID_RECORD


# --- several batches in one request -----------------------------------------------------------


def test_batches_of_one_request_are_checked_against_each_other(
    seven: ProducerStateManager,
) -> None:
    assert seven.check_leader_append([hdr(seq=14, count=2), hdr(seq=16), hdr(seq=17)]) is None
    assert code_of(seven, hdr(seq=14, count=2), hdr(seq=17)) == 45
    assert code_of(seven, hdr(seq=14), hdr(seq=14)) == 45  # a repeat inside the request
    assert code_of(seven, hdr(epoch=1, seq=0), hdr(epoch=0, seq=14)) == 47
    assert code_of(seven, hdr(epoch=1, seq=0), hdr(epoch=1, seq=2)) == 45
    assert seven.check_leader_append([hdr(epoch=1, seq=0), hdr(epoch=2, seq=0)]) is None


def test_batches_of_an_unknown_producer_must_follow_each_other() -> None:
    m = ProducerStateManager()
    assert m.check_leader_append([hdr(seq=40, count=2), hdr(seq=42)]) is None
    assert code_of(m, hdr(seq=40, count=2), hdr(seq=43)) == 45


def test_batches_of_different_producers_are_independent(seven: ProducerStateManager) -> None:
    assert seven.check_leader_append([hdr(pid=1, seq=9), hdr(seq=14), hdr(pid=1, seq=10)]) is None
    assert code_of(seven, hdr(pid=1, seq=9), hdr(seq=15)) == 45


def test_first_duplicate_in_a_request_answers_for_it(seven: ProducerStateManager) -> None:
    # As Kafka: the request is answered with the duplicate's offsets, nothing is appended.
    assert seven.check_leader_append([hdr(seq=14), hdr(seq=10, count=2)]) == DuplicateBatch(
        10, 11, T0 + 6
    )
    assert seven.check_leader_append([hdr(seq=10, count=2), hdr(seq=99)]) == DuplicateBatch(
        10, 11, T0 + 6
    )
    # A bad batch before the duplicate is reported.
    assert code_of(seven, hdr(seq=99), hdr(seq=10, count=2)) == 45


def test_batches_without_producer_id_are_not_checked(seven: ProducerStateManager) -> None:
    assert seven.check_leader_append([plain(), plain(3), hdr(seq=14), plain()]) is None
    before = state(seven)
    seven.update(plain(3)._replace(base_offset=14))
    assert seven.map_end_offset == 17
    assert seven.snapshot_entries() == before[0]


def test_headers_of_real_batches() -> None:
    m = ProducerStateManager()
    records = [Record(b"a", timestamp_ms=T0), Record(b"b", timestamp_ms=T0 + 5)]
    first = read_header(build_batch(records, producer_id=PID, producer_epoch=2, base_sequence=0))
    assert leader_append(m, first) is None
    assert m.check_leader_append([first]) == DuplicateBatch(0, 1, T0 + 5)
    gap = read_header(build_batch(records, producer_id=PID, producer_epoch=2, base_sequence=3))
    assert code_of(m, gap) == 45


# --- update (follower, replay) ----------------------------------------------------------------


def test_update_keeps_the_newest_batches_and_timestamp() -> None:
    m = ProducerStateManager()
    for i in range(8):
        m.update(hdr(seq=i, offset=10 + i, ts=T0 + 100 - i))
    entry = m.producers[PID]
    assert [b.first_offset for b in entry.batches] == [13, 14, 15, 16, 17]
    assert entry.last_seq == 7
    assert entry.last_offset == 17
    assert entry.last_timestamp == T0 + 93  # the newest batch's, even if an older was later
    assert m.map_end_offset == 18


def test_follower_update_with_newer_epoch_replaces_the_entry(seven: ProducerStateManager) -> None:
    seven.update(hdr(epoch=4, seq=50, count=2, offset=14, ts=T0 + 9))  # not validated
    entry = seven.producers[PID]
    assert (entry.producer_epoch, list(entry.batches)) == (
        4,
        [BatchMetadata(50, 51, 14, 15, T0 + 10)],
    )
    assert entry.last_timestamp == T0 + 10
    assert seven.map_end_offset == 16
    assert seven.check_leader_append([hdr(epoch=4, seq=52)]) is None
    assert code_of(seven, hdr(epoch=3, seq=0)) == 47


def test_update_never_refuses(seven: ProducerStateManager) -> None:
    # The log is the truth: an out-of-order or older-epoch batch that is in it is applied.
    seven.update(hdr(seq=99, offset=14))
    assert seven.producers[PID].last_seq == 99
    seven.update(hdr(epoch=5, seq=100, offset=15))  # a new epoch not at 0
    assert (seven.producers[PID].producer_epoch, seven.producers[PID].last_seq) == (5, 100)
    seven.update(hdr(epoch=0, seq=3, offset=16))  # an older epoch: replaces too, as Kafka
    assert (seven.producers[PID].producer_epoch, seven.producers[PID].last_seq) == (0, 3)
    assert len(seven.producers[PID].batches) == 1
    assert seven.map_end_offset == 17


# --- expiry, truncation, reset ----------------------------------------------------------------


def test_remove_expired_drops_idle_producers() -> None:
    m = ProducerStateManager()
    m.update(hdr(pid=3, ts=T0, offset=0))
    m.update(hdr(pid=1, ts=T0 + 10, offset=1))
    m.update(hdr(pid=2, ts=T0 + 11, offset=2))
    assert m.remove_expired(now_ms=T0 + 999, expiration_ms=1000) == []
    assert m.remove_expired(now_ms=T0 + 1000, expiration_ms=1000) == [3]  # idle exactly 1000
    m.update(hdr(pid=4, ts=T0, offset=3))
    assert m.remove_expired(now_ms=T0 + 1010, expiration_ms=1000) == [1, 4]
    assert sorted(m.producers) == [2]
    assert m.map_end_offset == 4
    # An expired producer is unknown again: any sequence is accepted.
    assert m.check_leader_append([hdr(pid=1, seq=77)]) is None


def test_truncate_to_forgets_batches_at_and_above_the_offset(seven: ProducerStateManager) -> None:
    seven.update(hdr(pid=2, seq=0, count=2, offset=14, ts=T0 + 50))
    seven.truncate_to(11)  # inside the batch at 10-11: the whole batch goes
    entry = seven.producers[PID]
    assert [b.first_offset for b in entry.batches] == [4, 6, 8]
    assert entry.last_timestamp == T0 + 4 + 1
    assert 2 not in seven.producers
    assert seven.map_end_offset == 11
    assert seven.check_leader_append([hdr(seq=10, count=2)]) is None
    seven.truncate_to(4)
    assert seven.producers == {}
    assert seven.map_end_offset == 4


def test_reset_copies_trims_and_refuses_repeated_ids() -> None:
    batches = deque(BatchMetadata(i, i, i, i, T0) for i in range(7))
    source = ProducerStateEntry(PID, 1, batches, T0)
    m = ProducerStateManager()
    m.update(hdr(pid=9, offset=0))
    m.reset([source], map_end_offset=42)
    assert m.map_end_offset == 42
    assert list(m.producers) == [PID]
    assert [b.first_seq for b in m.producers[PID].batches] == [2, 3, 4, 5, 6]
    source.batches.clear()
    source.producer_epoch = 9
    assert m.producers[PID].producer_epoch == 1
    assert m.check_leader_append([hdr(epoch=1, seq=7)]) is None
    with pytest.raises(ValueError, match="twice"):
        m.reset([source, source], 0)


def test_snapshot_entries_are_copies(seven: ProducerStateManager) -> None:
    entries = seven.snapshot_entries()
    entries[0].batches.clear()
    entries[0].producer_epoch = 5
    assert len(seven.producers[PID].batches) == MAX_CACHED_BATCHES
    assert seven.producers[PID].producer_epoch == 0


def test_producers_view_is_read_only(seven: ProducerStateManager) -> None:
    with pytest.raises(TypeError):
        seven.producers[5] = ProducerStateEntry(5, 0)  # type: ignore[index]


# --- properties -------------------------------------------------------------------------------

_batch = st.tuples(
    st.integers(0, 3),  # producer id
    st.integers(0, 2),  # epoch
    st.sampled_from([0, 1, 5, MAX_SEQUENCE - 1, MAX_SEQUENCE]),  # sequence
    st.integers(1, 4),  # record count
)


@settings(max_examples=300, deadline=None)
@given(history=st.lists(_batch, max_size=20), request=st.lists(_batch, min_size=1, max_size=3))
def test_accepted_request_is_a_duplicate_when_retried(
    history: list[tuple[int, int, int, int]], request: list[tuple[int, int, int, int]]
) -> None:
    """The idempotence guarantee: what check accepts, once appended, is recognised on retry
    with the offsets it got; and checking never changes the state."""
    m = ProducerStateManager()
    for pid, epoch, seq, count in history:
        m.update(hdr(pid, epoch, seq, count, offset=m.map_end_offset))
    headers = [hdr(pid, epoch, seq, count) for pid, epoch, seq, count in request]
    before = state(m)
    try:
        duplicate = m.check_leader_append(headers)
    except HighwaterError:
        assert state(m) == before
        return
    assert state(m) == before
    if duplicate is not None:
        return
    start = m.map_end_offset
    leader_append(m, *headers)
    last = headers[-1]
    if sum(1 for h in headers if h.producer_id == last.producer_id) == 1:
        # (A producer's earlier batch of the same request may have fallen out of its window.)
        assert m.check_leader_append([last]) == DuplicateBatch(
            start + sum(h.record_count for h in headers[:-1]),
            m.map_end_offset - 1,
            last.max_timestamp,
        )
