"""The log cleaner on real log files: after every cleaning the log reads, for every key, its
latest value (nothing once its tombstone expired), offsets strictly increase, and nothing at or
above the clean end changed; an interrupted swap recovers to the old or the new segments."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config.log_config import LogConfig
from broker.log.cleaner import CleaningResult, clean
from broker.log.errors import LogStorageError
from broker.log.log import Log
from protocol.compression import Compression
from protocol.errors import CorruptRecordError, InvalidRecordError, OutOfOrderSequenceError
from protocol.records import Record, build_batch, build_batch_from_entries, decode_batches
from tests.unit.log.helpers import T0

DAY_MS = 24 * 3600 * 1000
COMPACT = LogConfig(
    segment_bytes=2048,
    index_interval_bytes=256,
    cleanup_policy=("compact",),
    delete_retention_ms=DAY_MS,
)
KEYS = [f"k{i}".encode() for i in range(6)]


def produce(log: Log, *records: Record, producer: tuple[int, int, int] | None = None) -> None:
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    batch = build_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, now_ms=T0
    )
    log.append_as_leader(batch, 0, T0)


def clean_below_active(log: Log, first_dirty: int, now_ms: int) -> CleaningResult:
    """What the cleaner does to one log: plan below the active segment, clean, swap in."""
    task = log.cleaning_task(first_dirty, log.active_segment.base_offset, now_ms, 1 << 20)
    result = clean(task)
    assert log.replace_segments(task, result, now_ms)
    return result


def records_of(log: Log) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()
        batches = list(decode_batches(data))
        if not batches:
            break
        for batch in batches:
            out += batch.records
            offset = batch.header.next_offset
    return out


def latest(records: list[Record]) -> dict[bytes, bytes | None]:
    """Last write wins; a tombstone (None) deletes."""
    state: dict[bytes, bytes | None] = {}
    for record in records:
        assert record.key is not None
        state[record.key] = record.value
    return {k: v for k, v in state.items() if v is not None}


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"),
            st.sampled_from(KEYS),
            st.one_of(st.none(), st.binary(min_size=1, max_size=40)),
            st.integers(0, 3 * DAY_MS),  # the record's age at T0 + 3 days
        ),
        st.tuples(st.just("roll")),
        st.tuples(st.just("clean"), st.integers(0, 3 * DAY_MS)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_cleaning_keeps_the_latest_value_of_every_key(program: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        log = Log.open(Path(directory) / "t-0", COMPACT, now_ms=T0)
        written: list[Record] = []
        first_dirty = 0
        now_ms = T0 + 3 * DAY_MS
        try:
            for op in program:
                if op[0] == "write":
                    _, key, value, age = op
                    record = Record(value, key=key, timestamp_ms=now_ms - int(age))  # type: ignore[arg-type]
                    produce(log, record)
                    written.append(record)
                elif op[0] == "roll":
                    log.roll(T0)
                else:
                    horizon_ms = now_ms - COMPACT.delete_retention_ms
                    end = log.active_segment.base_offset
                    before = [s.log_path.read_bytes() for s in log.segments if s.base_offset >= end]
                    result = clean_below_active(log, first_dirty, now_ms)
                    first_dirty = max(first_dirty, result.end_offset)
                    stored = records_of(log)
                    offsets = [r.offset for r in stored]
                    assert offsets == sorted(set(offsets)), "offsets strictly increase"
                    after = [s.log_path.read_bytes() for s in log.segments if s.base_offset >= end]
                    assert after == before, "nothing at or above the clean end changed"
                    assert latest(stored) == latest(written)
                    # Tombstones below the end survive until their horizon, then go.
                    for r in stored:
                        if r.value is None and r.offset < end:
                            assert r.timestamp_ms >= horizon_ms
        finally:
            log.close()


def test_superseded_records_go_and_offsets_stay(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    for i in range(30):
        produce(log, Record(f"v{i}".encode(), key=KEYS[i % 3], timestamp_ms=T0))
    log.roll(T0)
    produce(log, Record(b"tail", key=KEYS[0], timestamp_ms=T0))
    result = clean_below_active(log, 0, T0)
    stored = records_of(log)
    assert [(r.offset, r.key, r.value) for r in stored] == [
        (27, KEYS[0], b"v27"),
        (28, KEYS[1], b"v28"),
        (29, KEYS[2], b"v29"),
        (30, KEYS[0], b"tail"),
    ]
    assert result.records_read == 30 and result.records_kept == 3
    assert log.log_end_offset == 31
    log.close()
    reopened = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0, clean_shutdown=False)
    assert [r.offset for r in records_of(reopened)] == [27, 28, 29, 30]
    reopened.close()


def _producers(log: Log) -> dict[int, tuple[int, int, list[tuple[int, int, int, int]]]]:
    """Producer id -> (epoch, last sequence, its cached batches as (first seq, last seq,
    first offset, last offset))."""
    return {
        pid: (
            e.producer_epoch,
            e.last_seq,
            [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches],
        )
        for pid, e in log.producer_state.producers.items()
    }


def test_a_producers_last_batch_keeps_its_header_and_loses_superseded_records(
    tmp_path: Path,
) -> None:
    """Kafka's BatchRetention.RETAIN_EMPTY: each idempotent producer's last batch stays, as
    its header alone when every record of it was superseded, with only its latest records
    otherwise; its producer id, epoch, sequence range and offsets are those it was written
    with, so the producer state rebuilt from the cleaned log is the same."""
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    produce(log, Record(b"a", key=KEYS[0]), Record(b"b", key=KEYS[1]), producer=(7, 0, 0))
    produce(log, Record(b"c", key=KEYS[0]), producer=(8, 0, 0))
    # 8's last batch: both records superseded below by 7's last batch.
    produce(log, Record(b"d", key=KEYS[1]), Record(b"d2", key=KEYS[0]), producer=(8, 0, 1))
    # 9's last batch (one record): k2 stays, k1 and k0 are superseded.
    produce(
        log,
        Record(b"g", key=KEYS[2]), Record(b"g1", key=KEYS[1]), Record(b"g0", key=KEYS[0]),
        producer=(9, 3, 40),
    )  # fmt: skip
    produce(log, Record(b"e", key=KEYS[0]), Record(b"f", key=KEYS[1]), producer=(7, 0, 2))
    log.roll(T0)
    state_before = _producers(log)
    result = clean_below_active(log, 0, T0)
    batches = [
        (h.producer_id, h.producer_epoch, h.base_offset, h.last_offset, h.record_count,
         h.base_sequence, h.last_sequence)
        for h in log.iter_batch_headers()
    ]  # fmt: skip
    assert batches == [
        (8, 0, 3, 4, 0, 1, 2),  # emptied: offsets and sequences as written, no records
        (9, 3, 5, 7, 1, 40, 42),  # filtered: only k2's record
        (7, 0, 8, 9, 2, 2, 3),  # all latest: as it was
    ]
    assert [(r.offset, r.key, r.value) for r in records_of(log)] == [
        (5, KEYS[2], b"g"),
        (8, KEYS[0], b"e"),
        (9, KEYS[1], b"f"),
    ]
    assert (result.records_read, result.records_kept) == (10, 3)
    assert log.log_end_offset == 10
    log.close()

    # Rebuilt from the cleaned log alone (no snapshot): the same producer state.
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    reopened = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0, clean_shutdown=False)
    try:
        rebuilt = _producers(reopened)
        assert {p: s[:2] for p, s in rebuilt.items()} == {p: s[:2] for p, s in state_before.items()}
        assert rebuilt[8][2][-1] == state_before[8][2][-1] == (1, 2, 3, 4)
        # Producer 8 goes on where it left off; a retry of its emptied batch is a duplicate.
        retry = build_batch(
            [Record(b"d", key=KEYS[1]), Record(b"d2", key=KEYS[0])],
            producer_id=8, producer_epoch=0, base_sequence=1, now_ms=T0,
        )  # fmt: skip
        duplicate = reopened.append_as_leader(retry, 0, T0)
        assert (duplicate.duplicate, duplicate.first_offset, duplicate.last_offset) == (
            True, 3, 4,
        )  # fmt: skip
        produce(reopened, Record(b"h", key=KEYS[3]), producer=(8, 0, 3))
        with pytest.raises(OutOfOrderSequenceError):
            produce(reopened, Record(b"i", key=KEYS[3]), producer=(8, 0, 5))
        assert reopened.log_end_offset == 11
    finally:
        reopened.close()


def test_an_emptied_batch_goes_once_it_is_no_longer_its_producers_last(tmp_path: Path) -> None:
    """Kafka's cleaner keeps an empty batch only while it is its producer's last; cleaned
    again after the producer wrote more, it goes, and its offsets become a gap."""
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    produce(log, Record(b"a", key=KEYS[0]), producer=(8, 0, 0))
    produce(log, Record(b"b", key=KEYS[0]))
    log.roll(T0)
    first = clean_below_active(log, 0, T0)
    assert [(h.producer_id, h.record_count) for h in log.iter_batch_headers()] == [
        (8, 0), (-1, 1),
    ]  # fmt: skip
    produce(log, Record(b"c", key=KEYS[1]), producer=(8, 0, 1))
    log.roll(T0)
    clean_below_active(log, first.end_offset, T0)
    assert [(h.producer_id, h.base_offset, h.record_count) for h in log.iter_batch_headers()] == [
        (-1, 1, 1), (8, 2, 1),
    ]  # fmt: skip
    assert [r.offset for r in records_of(log)] == [1, 2]
    log.close()


def test_a_filtered_batch_keeps_its_offsets_sequence_and_codec(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    records = [Record(f"v{i}".encode(), key=KEYS[i]) for i in range(4)]
    batch = build_batch(
        records, producer_id=5, producer_epoch=1, base_sequence=10, now_ms=T0,
        compression=Compression.GZIP,
    )  # fmt: skip
    log.append_as_leader(batch, 0, T0)
    produce(log, Record(b"new", key=KEYS[0]), Record(b"new", key=KEYS[3]), producer=(5, 1, 14))
    log.roll(T0)
    clean_below_active(log, 0, T0)
    headers = list(log.iter_batch_headers())
    first = headers[0]  # records 1 and 2 kept, in the batch as it was (Kafka's filterTo)
    assert (first.base_offset, first.last_offset, first.base_sequence) == (0, 3, 10)
    assert first.record_count == 2
    assert [r.offset for r in records_of(log)[:2]] == [1, 2]
    assert first.compression == Compression.GZIP
    assert first.producer_id == 5
    log.close()


def test_a_malformed_record_makes_the_cleaning_fail_clearly(tmp_path: Path) -> None:
    """A batch whose header and CRC are fine but whose record is not [ts, offset, key, value,
    headers] (a follower takes the leader's batches as they are) and must be kept: a clear
    CORRUPT_MESSAGE, and the shell marks the log uncleanable. (One a later record supersedes
    is simply dropped.)"""
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    bad = build_batch_from_entries([[0, 0, b"k"]], base_timestamp=T0, max_timestamp=T0)
    log.append_as_follower(bad, T0)
    produce(log, Record(b"v", key=b"other"))
    log.roll(T0)
    task = log.cleaning_task(0, log.active_segment.base_offset, T0, 1 << 20)
    with pytest.raises(CorruptRecordError, match="record 0"):
        clean(task)
    log.close()


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    with pytest.raises(InvalidRecordError, match="no key"):
        produce(log, Record(b"keyed", key=b"k"), Record(b"anonymous"))
    assert log.log_end_offset == 0
    log.close()


def test_a_log_changed_meanwhile_voids_the_cleaning(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    for i in range(20):
        produce(log, Record(b"x" * 50, key=KEYS[i % 2]))
    log.roll(T0)
    produce(log, Record(b"y", key=KEYS[0]))
    task = log.cleaning_task(0, log.active_segment.base_offset, T0, 1 << 20)
    result = clean(task)
    log.truncate_to(5)  # a follower truncating while the cleaner worked
    assert not log.replace_segments(task, result, T0)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert log.log_end_offset == 5
    log.close()


@pytest.mark.parametrize("crash_after", range(20))
def test_a_swap_interrupted_anywhere_recovers_old_or_new(
    tmp_path: Path, crash_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash at every file operation of the swap: on restart the log reads the same latest
    values, and no .cleaned or .swap file is left."""
    import os

    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    for i in range(40):
        produce(log, Record(f"{i}".encode() * 20, key=KEYS[i % 4]))
        if i % 10 == 9:
            log.roll(T0)
    produce(log, Record(b"tail", key=KEYS[0]))
    expected = latest(records_of(log))
    task = log.cleaning_task(0, log.active_segment.base_offset, T0, 1 << 20)
    result = clean(task)
    calls = {"n": 0}
    real_replace, real_unlink = os.replace, Path.unlink

    def counting(real):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            if calls["n"] > crash_after:
                raise LogStorageError("power loss")
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(os, "replace", counting(real_replace))
    monkeypatch.setattr(Path, "unlink", counting(real_unlink))
    with contextlib.suppress(LogStorageError):
        log.replace_segments(task, result, T0)
    monkeypatch.undo()
    for segment in log.segments:
        segment.close()
    reopened = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0, clean_shutdown=False)
    try:
        assert latest(records_of(reopened)) == expected
        debris = [p.name for p in (tmp_path / "t-0").iterdir() if p.suffix in (".cleaned", ".swap")]
        assert debris == []
    finally:
        reopened.close()


def test_timestamp_lookups_pass_over_an_emptied_batch(tmp_path: Path) -> None:
    """An emptied batch keeps its max timestamp (Kafka's writeEmptyHeader): ListOffsets
    by timestamp skips it, and KIP-734's max timestamp answers with its last offset, the
    record that had that timestamp being gone."""
    log = Log.open(tmp_path / "t-0", COMPACT, now_ms=T0)
    produce(log, Record(b"a", key=KEYS[0], timestamp_ms=T0 + 10), producer=(8, 0, 0))
    produce(log, Record(b"b", key=KEYS[0], timestamp_ms=T0), Record(b"c", key=KEYS[1]))
    produce(log, Record(b"d", key=KEYS[2], timestamp_ms=T0 + 5))
    log.roll(T0)
    clean_below_active(log, 0, T0)
    assert [h.record_count for h in log.iter_batch_headers()] == [0, 2, 1]
    assert log.fetch_offset_of_max_timestamp(log.log_end_offset) == (0, T0 + 10)
    assert log.fetch_offset_by_timestamp(T0 + 1) == (3, T0 + 5)
    log.close()
