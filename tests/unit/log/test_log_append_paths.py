"""The leader's one-batch append (a flattened fast path) behaves exactly as the general path.

`Log.append_as_leader` takes a request holding one batch through its own inlined steps; a
request of several batches goes through `_validate` and `_append_batches_as_leader`. Here the
same random sequence of requests (good, bad, idempotent, resent, new epochs, truncations, rolls
by size, time and full index, flushes) is applied to two logs, one through each path, and
after every step the results, errors, files, indexes, epoch cache and producer state must match.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.log import Log, LogAppendInfo
from protocol.errors import HighwaterError
from protocol.records import (
    Record,
    build_batch,
    build_batch_from_entries,
    check_batches,
    iter_batch_headers,
)
from tests.unit.log.helpers import ATTRIBUTES_AT, T0, make_batch, open_log, rewrite_header, snapshot

PIDS = (7, 8)


def general_append(log: Log, records: bytes, leader_epoch: int, now_ms: int) -> LogAppendInfo:
    """append_as_leader as it runs for a request of several batches, for any request."""
    headers = log._validate(records, from_producer=True)
    return log._append_batches_as_leader(records, headers, leader_epoch, now_ms)


def state(log: Log) -> tuple[object, ...]:
    producers = {
        pid: (e.producer_epoch, list(e.batches)) for pid, e in log.producer_state.producers.items()
    }
    return (
        snapshot(log),
        log.leader_epoch_cache.latest,
        [(s.offset_index.is_full, s.time_index.is_full) for s in log.segments],
        producers,
        log.producer_state.map_end_offset,
    )


def outcome(append: object, log: Log, records: bytes, epoch: int, now_ms: int) -> object:
    try:
        return append(log, records, epoch, now_ms)  # type: ignore[operator]
    except HighwaterError as exc:
        return type(exc), str(exc), exc.code


class Producers:
    """Idempotent producers' next sequence and epoch, advanced only by accepted appends."""

    def __init__(self) -> None:
        self.next = {pid: (0, 0) for pid in PIDS}  # pid -> (producer epoch, next sequence)
        self.last: dict[int, bytes] = {}  # pid -> its last accepted batch
        self.pending: tuple[int, int, int, bytes] | None = None

    def batch(self, rng: random.Random, count: int, ts: int) -> bytes:
        pid = rng.choice(PIDS)
        producer_epoch, seq = self.next[pid]
        # Mostly in order; sometimes a resend, a gap, a fenced or a bumped producer epoch.
        choice = rng.choice(["next", "next", "next", "resend", "gap", "fenced", "bump"])
        if choice == "resend" and pid in self.last:
            return self.last[pid]
        if choice == "gap":
            seq += 3
        elif choice == "fenced" and producer_epoch:
            producer_epoch -= 1
        elif choice == "bump":
            producer_epoch, seq = producer_epoch + 1, 0
        records = [Record(f"{pid}/{seq + i}".encode(), timestamp_ms=ts + i) for i in range(count)]
        batch = build_batch(
            records, producer_id=pid, producer_epoch=producer_epoch, base_sequence=seq, now_ms=T0
        )
        self.pending = (pid, producer_epoch, seq + count, batch)
        return batch

    def accepted(self) -> None:
        if self.pending is not None:
            pid, producer_epoch, next_seq, batch = self.pending
            self.next[pid] = (producer_epoch, next_seq)
            self.last[pid] = batch


def random_request(rng: random.Random, producers: Producers, ts: int) -> bytes:
    producers.pending = None
    kind = rng.choice(["plain", "plain", "idempotent", "idempotent", "bad"])
    count = rng.randint(1, 6)
    if kind == "plain":
        return make_batch(count, ts=ts, step=rng.randint(0, 3), tag=rng.randint(0, 10**6))
    if kind == "idempotent":
        return producers.batch(rng, count, ts)
    good = make_batch(count, ts=ts)
    entries = [[0, i, None, b"v", []] for i in range(count)]
    entries[-1][rng.choice([1, 2, 3])] = rng.choice([count, "x", 0.5])  # offset delta or types
    poison = build_batch_from_entries(entries, base_timestamp=ts, max_timestamp=ts)
    return rng.choice(
        [
            poison,  # records that consumers could not read, or out of order
            good + poison,  # several batches, the last one bad
            rewrite_header(good, "h", ATTRIBUTES_AT, 1),  # gzip flag, plain records
            b"",
            good[:-1],  # torn
            good[:-1] + bytes([good[-1] ^ 1]),  # bad CRC
            rewrite_header(good, "q", 0, 5),  # base offset set by a producer
            rewrite_header(good, "h", ATTRIBUTES_AT, 0x10),  # transactional
            make_batch(1, value=b"v" * 700, ts=ts),  # over message.max.bytes
            make_batch(60, value=b"w" * 40, ts=ts),  # over segment.bytes
        ]
    )


@pytest.mark.parametrize("seed", range(12))
def test_one_batch_fast_path_matches_the_general_path(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = LogConfig(
        segment_bytes=2048,
        segment_ms=rng.choice([50, 10**6]),
        segment_index_bytes=64,  # 8 offset index entries, 5 time index entries
        index_interval_bytes=rng.choice([0, 100, 300]),
        max_message_bytes=600,
        flush_messages=rng.choice([1, 5, 10**9]),
    )
    fast = open_log(tmp_path / "fast-0", config)
    general = open_log(tmp_path / "general-0", config)
    producers = Producers()
    epoch = 0
    now_ms = T0
    most_segments = 1
    for _ in range(120):
        step = rng.random()
        if step < 0.05 and fast.log_end_offset > 0:
            offset = rng.randrange(fast.log_end_offset)
            assert fast.truncate_to(offset) == general.truncate_to(offset)
        else:
            if step < 0.12:
                epoch += 1
            now_ms += rng.randint(0, 20)
            ts = now_ms + rng.randint(-30, 30)
            records = random_request(rng, producers, ts)
            leader_epoch = rng.choice([epoch, epoch, epoch, -1])
            expected = outcome(general_append, general, records, leader_epoch, now_ms)
            actual = outcome(Log.append_as_leader, fast, records, leader_epoch, now_ms)
            assert actual == expected
            if isinstance(actual, LogAppendInfo) and not actual.duplicate:
                producers.accepted()
        assert state(fast) == state(general)
        most_segments = max(most_segments, len(fast.segments))
    assert most_segments > 1  # the sequence did roll
    fast.close()
    general.close()


# --- check_batches: the validation each append runs, with its own one-batch fast path --------


def checked(check: object, buf: bytes | memoryview) -> object:
    try:
        return list(check(buf))  # type: ignore[operator]
    except HighwaterError as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("seed", range(20))
def test_check_batches_matches_header_by_header_validation(seed: int) -> None:
    """check_batches (bytes or memoryview, one batch or several) gives the same headers, or the
    same error, as read_header + validate_batch batch by batch, on good and damaged input."""
    rng = random.Random(seed)
    batches = [make_batch(rng.randint(1, 5), tag=i) for i in range(rng.randint(1, 3))]
    good = b"".join(batches)
    damaged = [good, good[: rng.randrange(len(good))], good + bytes(rng.randint(1, 70))]
    for _ in range(20):
        flipped = bytearray(good)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        damaged.append(bytes(flipped))
    damaged.append(rewrite_header(batches[0], "b", 16, 1) + good[len(batches[0]) :])  # magic
    for count in (0, 9):  # record_count not last_offset_delta + 1 (batches hold 1-5 records)
        damaged.append(rewrite_header(batches[0], "i", 57, count) + good[len(batches[0]) :])
    no_records = rewrite_header(rewrite_header(batches[0], "i", 23, -1), "i", 57, 0)
    damaged.append(no_records + good[len(batches[0]) :])  # coherent, but no records
    damaged.append(rewrite_header(batches[0], "i", 8, 10) + good[len(batches[0]) :])  # length
    for buf in damaged:
        expected = checked(iter_batch_headers, buf)
        assert checked(check_batches, buf) == expected
        assert checked(check_batches, memoryview(buf)) == expected
