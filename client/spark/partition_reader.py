"""One Spark task's read: the records [start, end) of one partition, as Arrow batches.

Runs on an executor. A fetch loop on its own trio thread asks whichever broker leads the
partition now (Fetch with the leader epoch from the metadata, KIP-320, so a stale leader
answers FENCED_LEADER_EPOCH), follows leader changes and retries retriable errors, and turns
each response into Arrow columns (columns.ColumnBuilder) handed to Spark's thread through a
small queue: fetching the next response overlaps with Spark taking the last one. Brokers serve
consumers only records below the high watermark, and `end` was planned at or below it, so
every record read is committed.

Data loss: offsets below the log start (deleted by retention), or a log that no longer
reaches `end` (truncated by an unclean election). With failOnDataLoss the task fails with
DataLossError; without it, it logs a warning and reads what is left.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import trio

from client.consumer import LEADER_ERRORS
from client.errors import NoBrokersAvailable, error_for_code
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
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
from protocol.records import LOG_OVERHEAD_BYTES

__all__ = ["ReadSettings", "read_range"]

FETCH_BYTES: Final = 4 * 1024 * 1024
MAX_FETCH_BYTES: Final = 64 * 1024 * 1024  # a single batch larger than this is an error
MAX_WAIT_MS: Final = 500
REQUEST_TIMEOUT_MS: Final = 30_000
RETRY_BACKOFF_MS: Final = 100
RETRY_BACKOFF_MAX_MS: Final = 1_000
ROWS_PER_BATCH: Final = 65_536  # Arrow batches handed to Spark hold at most about this many
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


async def _fetch_loop(
    settings: ReadSettings, task: OffsetRange, deliver: Callable[[object], None]
) -> None:
    topic, partition = task.tp
    metadata = ClusterMetadata(
        settings.bootstrap_servers,
        client_id="highwater-spark-reader",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        retry_backoff_ms=RETRY_BACKOFF_MS,
    )
    metadata.add_topics([topic])
    columns = ColumnBuilder(topic, partition, settings.include_headers)
    position = task.start
    fetch_bytes = FETCH_BYTES
    failures = 0
    last_progress_s = time.monotonic()
    try:
        while position < task.end:
            if time.monotonic() - last_progress_s > settings.poll_timeout_ms / 1000:
                report_data_loss(
                    settings.fail_on_data_loss,
                    f"{task.tp}: no record at offset {position} for "
                    f"{settings.poll_timeout_ms} ms (planned up to {task.end})",
                )
                return
            data = await _fetch(metadata, topic, partition, position, fetch_bytes)
            if data is None or data.error_code in LEADER_ERRORS:
                metadata.request_update()
                failures += 1
                delay_ms = min(RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS * 2 ** min(failures, 10))
                await trio.sleep(delay_ms / 1000)
                continue
            failures = 0
            if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                position = _after_out_of_range(settings, task, position, data)
                continue
            if data.error_code != ErrorCode.NONE:
                raise error_for_code(data.error_code, f"fetch {task.tp} at offset {position}")
            batches, next_offset = columns.add(data.records, position, task.end)
            if batches == 0:
                if len(data.records) >= LOG_OVERHEAD_BYTES:
                    # Only part of one batch came: it is larger than the fetch size.
                    if fetch_bytes >= MAX_FETCH_BYTES:
                        raise error_for_code(
                            ErrorCode.MESSAGE_TOO_LARGE,
                            f"a batch of {task.tp} at offset {position} exceeds "
                            f"{MAX_FETCH_BYTES} bytes",
                        )
                    fetch_bytes = min(MAX_FETCH_BYTES, fetch_bytes * 2)
                # Else nothing yet (e.g. a new leader whose HW lags): the broker waited
                # max_wait_ms before answering, so asking again is not a busy loop.
                continue
            fetch_bytes = FETCH_BYTES
            last_progress_s = time.monotonic()
            position = max(position, min(next_offset, task.end))
            if len(columns) >= ROWS_PER_BATCH or position >= task.end:
                deliver(columns.flush())  # blocks this loop while Spark is behind: fine
        if len(columns):
            deliver(columns.flush())
    finally:
        await metadata.aclose()


async def _fetch(
    metadata: ClusterMetadata, topic: str, partition: int, offset: int, fetch_bytes: int
) -> FetchPartitionData | None:
    """One Fetch of the partition from its leader; None if there is no leader or no answer."""
    if metadata.update_requested or metadata.leader_for(topic, partition) is None:
        try:
            await metadata.refresh()
        except (BrokerConnectionError, NoBrokersAvailable):
            return None  # retried by the caller, which counts the time without progress
    leader = metadata.leader_for(topic, partition)
    info = metadata.partition_info(topic, partition)
    if leader is None or info is None:
        return None
    request = FetchRequest(
        replica_id=CONSUMER_REPLICA_ID,
        max_wait_ms=MAX_WAIT_MS,
        min_bytes=1,
        max_bytes=fetch_bytes,
        topics=(
            FetchTopic(
                topic,
                (
                    FetchPartition(
                        partition, offset, fetch_bytes, current_leader_epoch=info.leader_epoch
                    ),
                ),
            ),
        ),
    )
    try:
        response: FetchResponse = await metadata.request(
            leader, request, timeout_ms=MAX_WAIT_MS + REQUEST_TIMEOUT_MS
        )
    except BrokerConnectionError:
        return None
    for topic_response in response.responses:
        for data in topic_response.partitions:
            if topic_response.topic == topic and data.partition_index == partition:
                return data
    return None


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
