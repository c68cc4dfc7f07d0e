"""Fetch sessions, the client's half (KIP-227; Kafka's FetchSessionHandler): what the next
Fetch names, given the partitions wanted and what the broker's session already holds.

`build` makes a full request (no session yet, or after an error: it asks for a new one and
closes the old) or an incremental one (only partitions whose fetch parameters changed, and
those no longer wanted as forgotten); `handle_response` and `handle_error` move the session
on. Partitions an incremental answer leaves out have nothing new: no records, the same high
watermark and log start offset as last told.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchPartition,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from protocol.topic_partition import TopicPartition

__all__ = ["FetchPlan", "FetchSessionHandler", "fetch_entry", "fetch_topics", "next_epoch"]

_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The session epoch after `epoch`; it wraps to 1 (0 and -1 have their own meanings)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


def fetch_entry(
    last: FetchPartition | None,
    partition: int,
    fetch_offset: int,
    max_bytes: int,
    leader_epoch: int,
    log_start_offset: int = -1,
) -> FetchPartition:
    """A partition's entry in the next Fetch: `last` (what the previous one asked for this
    partition) when nothing in it changed, so that `build` sees the very object the session
    holds and skips comparing it (most partitions of a round are idle); else a new one."""
    if (
        last is not None
        and last.fetch_offset == fetch_offset
        and last.partition_max_bytes == max_bytes
        and last.current_leader_epoch == leader_epoch
        and last.log_start_offset == log_start_offset
    ):
        return last
    return FetchPartition(
        partition,
        fetch_offset,
        max_bytes,
        current_leader_epoch=leader_epoch,
        log_start_offset=log_start_offset,
    )


def fetch_topics(
    partitions: Iterable[tuple[TopicPartition, FetchPartition]],
) -> tuple[FetchTopic, ...]:
    """Partitions grouped by topic, as a Fetch names them."""
    by_topic: dict[str, list[FetchPartition]] = {}
    for tp, fetch in partitions:
        by_topic.setdefault(tp.topic, []).append(fetch)
    return tuple(FetchTopic(topic, tuple(fetches)) for topic, fetches in sorted(by_topic.items()))


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """The session fields and partitions of one Fetch request."""

    session_id: int
    session_epoch: int
    topics: tuple[FetchTopic, ...]
    forgotten: tuple[ForgottenTopic, ...]

    @property
    def full(self) -> bool:
        return self.session_epoch == INITIAL_EPOCH


@dataclass(slots=True)
class FetchSessionHandler:
    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH  # of the next request; INITIAL_EPOCH: the next is full
    # The session's partitions as the broker holds them once the request in flight is answered.
    session: dict[TopicPartition, FetchPartition] = field(default_factory=dict)
    _pending: dict[TopicPartition, FetchPartition] | None = None

    def build(self, wanted: dict[TopicPartition, FetchPartition]) -> FetchPlan:
        self._pending = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return FetchPlan(self.session_id, INITIAL_EPOCH, fetch_topics(wanted.items()), ())
        session = self.session
        # `is` first: `fetch_entry` hands back the very object sent while nothing changed.
        changed = [
            (tp, f) for tp, f in wanted.items() if (s := session.get(tp)) is not f and s != f
        ]
        forgotten: dict[str, list[int]] = {}
        for tp in self.session:
            if tp not in wanted:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
        return FetchPlan(
            self.session_id,
            self.epoch,
            fetch_topics(changed),
            tuple(ForgottenTopic(t, tuple(ps)) for t, ps in forgotten.items()),
        )

    def handle_response(self, response: FetchResponse) -> None:
        """After an answer to the request `build` made last."""
        pending, self._pending = self._pending, None
        if response.error_code != ErrorCode.NONE or pending is None:
            self.handle_error()  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH...
            return
        if self.epoch == INITIAL_EPOCH:
            self.session_id = response.session_id
            self.epoch = INITIAL_EPOCH if response.session_id == INVALID_SESSION_ID else 1
        else:
            self.epoch = next_epoch(self.epoch)
        self.session = pending

    def handle_error(self) -> None:
        """The request failed or was refused (or its answer was lost): start again with a
        full request, which also closes the broker's copy of the old session."""
        self._pending = None
        self.epoch = INITIAL_EPOCH
        self.session = {}

    @property
    def incremental(self) -> bool:
        return self.epoch != INITIAL_EPOCH
