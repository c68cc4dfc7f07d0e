"""One Spark task's read: the records [start, end) of one partition, as Arrow batches.

A fetch loop on its own trio thread follows the leader (KIP-320 epochs), keeps one Fetch ahead
of its decoding and hands Arrow columns (columns.ColumnBuilder) to Spark's thread through a
small queue. `end` is at or below the HW, so every record read is committed. Data loss
(retention, or an unclean election's truncation found with OffsetForLeaderEpoch) fails the
task with DataLossError under failOnDataLoss, else logs a warning. See docs/spark.md.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Final

import pyarrow as pa
import trio

from client.consumer import LEADER_ERRORS, truncation_offset
from client.errors import NoBrokersAvailable, error_for_code
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.settings import (
    FETCH_MAX_WAIT_MS,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_MAX_MS,
    RETRY_BACKOFF_MS,
)
from client.spark.columns import ColumnBuilder
from client.spark.data_loss import report_data_loss
from client.spark.offsets import OffsetRange
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopic,
)
from protocol.records import LOG_OVERHEAD_BYTES, next_offset_after_whole_batches

__all__ = ["ReadSettings", "read_range"]

FETCH_BYTES: Final = 4 * 1024 * 1024
FIRST_FETCH_BYTES: Final = 512 * 1024  # arrives sooner, so Spark's side of the task starts sooner
MAX_FETCH_BYTES: Final = 64 * 1024 * 1024  # a single batch larger than this is an error
MAX_WAIT_MS: Final = FETCH_MAX_WAIT_MS
ROWS_PER_BATCH: Final = 65_536  # Arrow batches handed to Spark hold at most about this many
BYTES_PER_BATCH: Final = 16 * 1024 * 1024  # ... and about this many bytes (large records)
QUEUED_BATCHES: Final = 4  # bounds the memory a task holds ahead of Spark
_DONE: Final = object()


class _ReaderGone(Exception):
    """The reading side stopped (Spark closed the iterator): the fetch loop ends."""


@dataclass(frozen=True)
class ReadSettings:
    bootstrap_servers: str
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int  # a fetch loop that makes no progress this long reports data loss
    security: tuple[tuple[str, str], ...] = ()  # Kafka's client security properties


def read_range(settings: ReadSettings, task: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records [task.start, task.end) of one partition, in offset order."""
    if task.size <= 0:
        return
    handoff: queue.Queue[object] = queue.Queue(QUEUED_BATCHES)
    stop = threading.Event()

    def deliver(item: object) -> None:
        """Hand an item to the reading thread (blocking while the queue is full)."""
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _ReaderGone

    def fetch_thread() -> None:
        try:
            trio.run(_fetch_loop, settings, task, deliver)
            deliver(_DONE)
        except _ReaderGone:
            pass
        except BaseException as exc:  # handed to the reading thread, which raises it
            with contextlib.suppress(_ReaderGone):
                deliver(exc)

    thread = threading.Thread(target=fetch_thread, name=f"highwater-fetch-{task.tp}", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, pa.RecordBatch)
            yield item
    finally:
        stop.set()  # Spark may stop early (a LIMIT): let the fetch thread end
        thread.join(timeout=5)


class _FetchAhead:
    """A Fetch sent before the previous response is decoded, so the broker reads and sends
    the next records while this task turns the last ones into columns."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self._done = trio.Event()
        self._data: FetchPartitionData | None = None
        self._error: Exception | None = None

    async def run(
        self,
        fetch: Callable[..., Awaitable[FetchPartitionData | None]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False

        def sent() -> None:
            nonlocal started
            started = True
            task_status.started()

        try:
            self._data = await fetch(self.offset, on_sent=sent)
        except Exception as exc:  # raised to the loop when it takes the result, as if inline
            self._error = exc
        finally:
            self._done.set()
            if not started:
                task_status.started()

    async def result(self) -> FetchPartitionData | None:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._data


async def _fetch_loop(
    settings: ReadSettings, task: OffsetRange, deliver: Callable[[object], None]
) -> None:
    metadata = ClusterMetadata(
        settings.bootstrap_servers,
        client_id="highwater-spark-reader",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        retry_backoff_ms=RETRY_BACKOFF_MS,
        security=dict(settings.security),
    )
    metadata.add_topics([task.tp.topic])
    error: Exception | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                await _RangeFetcher(settings, task, metadata, nursery).run(deliver)
            except Exception as exc:  # raised below, not wrapped in the nursery's group
                error = exc
            nursery.cancel_scope.cancel()  # a fetch may still be ahead (an error, data loss)
    finally:
        await metadata.aclose()
    if error is not None:
        raise error


class _RangeFetcher:
    """The fetch loop of one task: [task.start, task.end) of one partition, as Arrow batches."""

    def __init__(
        self,
        settings: ReadSettings,
        task: OffsetRange,
        metadata: ClusterMetadata,
        nursery: trio.Nursery,
    ) -> None:
        self.settings = settings
        self.task = task
        self.metadata = metadata
        self.nursery = nursery
        self.columns = ColumnBuilder(task.tp.topic, task.tp.partition, settings.include_headers)
        self.position = task.start
        self.fetch_bytes = FIRST_FETCH_BYTES
        self.ahead: _FetchAhead | None = None
        self.leader_epoch: int | None = None  # the one this task's fetches were answered under
        # The first Arrow batch goes with the first response, so Spark's side of the task
        # starts while the next fetches arrive; the later ones are full size.
        self.flush_rows = 1

    async def run(self, deliver: Callable[[object], None]) -> None:
        task, columns = self.task, self.columns
        failures = 0
        last_progress_s = time.monotonic()
        while self.position < task.end:
            if time.monotonic() - last_progress_s > self.settings.poll_timeout_ms / 1000:
                report_data_loss(
                    self.settings.fail_on_data_loss,
                    f"{task.tp}: no record at offset {self.position} for "
                    f"{self.settings.poll_timeout_ms} ms (planned up to {task.end})",
                )
                break
            data = await self._next_response()
            if data is None or data.error_code in LEADER_ERRORS:
                self.metadata.request_update()
                failures += 1
                delay_ms = min(RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS * 2 ** min(failures, 10))
                await trio.sleep(delay_ms / 1000)
                continue
            failures = 0
            if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self.position = _after_out_of_range(self.settings, task, self.position, data)
                continue
            if data.error_code != ErrorCode.NONE:
                raise error_for_code(data.error_code, f"fetch {task.tp} at offset {self.position}")
            following = next_offset_after_whole_batches(data.records)
            if self.position < following:  # whole batches came: the next fetch is full size
                self.fetch_bytes = FETCH_BYTES
            if self.position < following < task.end:
                self.ahead = _FetchAhead(following)
                await self.nursery.start(self.ahead.run, partial(self._fetch, ahead=True))
            batches, next_offset = columns.add(data.records, self.position, task.end)
            if batches == 0:
                self._no_whole_batch(data)
                continue
            last_progress_s = time.monotonic()
            self.position = max(self.position, min(next_offset, task.end))
            if (
                len(columns) >= self.flush_rows
                or columns.batch_bytes >= BYTES_PER_BATCH
                or self.position >= task.end
            ):
                deliver(columns.flush())  # blocks this loop while Spark is behind: fine
                self.flush_rows = ROWS_PER_BATCH
        if len(columns):
            deliver(columns.flush())

    async def _next_response(self) -> FetchPartitionData | None:
        """The response for the current position: the one fetched ahead if it is for here."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            data = await ahead.result()
            if ahead.offset == self.position:
                return data
        return await self._fetch(self.position)

    async def _fetch(
        self, offset: int, on_sent: Callable[[], object] | None = None, *, ahead: bool = False
    ) -> FetchPartitionData | None:
        """One Fetch at `offset` from the partition's leader; None if there is no leader or no
        answer. Under a new leader epoch, what this task read is validated first (KIP-320);
        a fetch ahead leaves that to the loop and answers None."""
        metadata = self.metadata
        topic, partition = self.task.tp
        if metadata.update_requested or metadata.leader_for(topic, partition) is None:
            try:
                await metadata.refresh()
            except (BrokerConnectionError, NoBrokersAvailable):
                return None  # retried by the loop, which counts the time without progress
        leader = metadata.leader_for(topic, partition)
        info = metadata.partition_info(topic, partition)
        if leader is None or info is None:
            return None
        if info.leader_epoch != self.leader_epoch:
            if ahead or not await self._validate(leader, info.leader_epoch):
                return None
            self.leader_epoch = info.leader_epoch
        request = FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=self.fetch_bytes,
            topics=(
                FetchTopic(
                    topic,
                    (
                        FetchPartition(
                            partition,
                            offset,
                            self.fetch_bytes,
                            current_leader_epoch=info.leader_epoch,
                        ),
                    ),
                ),
            ),
        )
        try:
            response: FetchResponse = await metadata.request(
                leader, request, timeout_ms=MAX_WAIT_MS + REQUEST_TIMEOUT_MS, on_sent=on_sent
            )
        except BrokerConnectionError:
            return None
        for topic_response in response.responses:
            for data in topic_response.partitions:
                if topic_response.topic == topic and data.partition_index == partition:
                    return data
        return None

    async def _validate(self, leader: int, leader_epoch: int) -> bool:
        """KIP-320 after a leader change: does the leader's log still hold what this task read?
        If not (an unclean election truncated it), that is data loss, reported per
        failOnDataLoss. False: no usable answer, the loop asks again."""
        read_epoch = self.columns.last_leader_epoch
        if read_epoch is None or read_epoch < 0:
            return True  # nothing read yet (or only batches from before leader epochs)
        tp = self.task.tp
        request = OffsetForLeaderEpochRequest(
            (
                OffsetForLeaderEpochTopic(
                    tp.topic,
                    (OffsetForLeaderEpochPartition(tp.partition, read_epoch, leader_epoch),),
                ),
            )
        )
        try:
            response: OffsetForLeaderEpochResponse = await self.metadata.request(
                leader, request, timeout_ms=REQUEST_TIMEOUT_MS
            )
        except BrokerConnectionError:
            return False
        results = [
            r
            for t in response.topics
            if t.topic == tp.topic
            for r in t.partitions
            if r.partition == tp.partition
        ]
        if not results or results[0].error_code in LEADER_ERRORS:
            self.metadata.request_update()
            return False
        result = results[0]
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(result.error_code, f"OffsetForLeaderEpoch {tp}")
        divergent = truncation_offset(
            self.position, read_epoch, result.leader_epoch, result.end_offset
        )
        if divergent is not None:
            report_data_loss(
                self.settings.fail_on_data_loss,
                f"{tp}: offsets {divergent} to {self.position - 1}, already read, are not in "
                f"the log of the leader of epoch {leader_epoch} (truncated by an unclean "
                "leader election)",
            )
        return True

    def _no_whole_batch(self, data: FetchPartitionData) -> None:
        if len(data.records) >= LOG_OVERHEAD_BYTES:
            # Only part of one batch came: it is larger than the fetch size.
            if self.fetch_bytes >= MAX_FETCH_BYTES:
                raise error_for_code(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"a batch of {self.task.tp} at offset {self.position} exceeds "
                    f"{MAX_FETCH_BYTES} bytes",
                )
            self.fetch_bytes = min(MAX_FETCH_BYTES, max(FETCH_BYTES, self.fetch_bytes * 2))
        # Else nothing yet (e.g. a new leader whose HW lags): the broker waited max_wait_ms
        # before answering, so asking again is not a busy loop.


def _after_out_of_range(
    settings: ReadSettings, task: OffsetRange, position: int, data: FetchPartitionData
) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE at `position`."""
    if position < data.log_start_offset:
        report_data_loss(
            settings.fail_on_data_loss,
            f"{task.tp}: offsets {position} to {min(data.log_start_offset, task.end) - 1} were "
            f"deleted (log start offset now {data.log_start_offset})",
        )
        return min(data.log_start_offset, task.end)
    report_data_loss(
        settings.fail_on_data_loss,
        f"{task.tp}: offset {position} is beyond the log (high watermark "
        f"{data.high_watermark}; planned up to {task.end})",
    )
    return task.end
