"""One Spark task's read: the records [start, end) of one partition, as Arrow batches.

Runs on an executor. The consumer fetches from whichever broker leads the partition now
(following leader changes, retrying, and checking the log after a leader change, KIP-320);
brokers serve consumers only records below the high watermark, and `end` was planned at or
below it, so every record read is committed.

Data loss: offsets below the log start (deleted by retention), or a log truncated below
`end` (an unclean election), or records already read truncated away. With failOnDataLoss
the task fails with DataLossError; without it, it logs a warning and reads what is left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Final

import pyarrow as pa
import structlog

from client.blocking import BlockingConsumer
from client.errors import LogTruncationError, OffsetOutOfRangeError
from client.spark.offsets import OffsetRange
from client.spark.rows import records_to_batch

__all__ = ["DataLossError", "read_range"]

log = structlog.get_logger(__name__)

MAX_POLL_RECORDS: Final = 20_000
POLL_MS: Final = 500
FETCH_BYTES: Final = 8 * 1024 * 1024


class DataLossError(RuntimeError):
    """Records the query needs are gone (failOnDataLoss=true)."""


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    """Raise (failOnDataLoss=true) or log: Spark's Kafka source does the same."""
    hint = (
        " Some data may have been lost because they are not available any more: deleted by "
        "retention or truncated away by an unclean leader election. If you want the query "
        "to go on, set the source option 'failOnDataLoss' to 'false'."
    )
    if fail_on_data_loss:
        raise DataLossError(message + hint)
    log.warning("data_loss", detail=message)


def read_range(
    bootstrap_servers: str,
    task: OffsetRange,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[pa.RecordBatch]:
    if task.size <= 0:
        return
    tp = (task.tp.topic, task.tp.partition)
    with BlockingConsumer(
        bootstrap_servers,
        client_id="highwater-spark-reader",
        auto_offset_reset="none",
        fetch_max_wait_ms=POLL_MS,
        max_partition_fetch_bytes=FETCH_BYTES,
        max_poll_records=MAX_POLL_RECORDS,
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, task.start)
        position = task.start
        last_progress_s = time.monotonic()
        while position < task.end:
            try:
                records = consumer.poll(POLL_MS, MAX_POLL_RECORDS)
            except OffsetOutOfRangeError:
                position = _after_out_of_range(consumer, task, position, fail_on_data_loss)
                if position >= task.end:
                    return
                consumer.seek(tp, position)
                continue
            except LogTruncationError as exc:
                report_data_loss(fail_on_data_loss, f"{task.tp}: {exc}")
                return
            if not records:
                if time.monotonic() - last_progress_s > poll_timeout_ms / 1000:
                    hw = consumer.highwater(tp)
                    report_data_loss(
                        fail_on_data_loss,
                        f"{task.tp}: no record at offset {position} after {poll_timeout_ms} ms "
                        f"(planned up to {task.end}; high watermark now {hw})",
                    )
                    return
                continue
            last_progress_s = time.monotonic()
            if records[-1].offset >= task.end:
                records = [r for r in records if r.offset < task.end]
            if records:
                position = records[-1].offset + 1
                yield records_to_batch(records, include_headers)


def _after_out_of_range(
    consumer: BlockingConsumer, task: OffsetRange, position: int, fail_on_data_loss: bool
) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE at `position`: the log start offset."""
    tp = (task.tp.topic, task.tp.partition)
    log_start = consumer.beginning_offsets([tp])[tp]  # type: ignore[index]
    if log_start <= position:
        # Out of range above the log: the log was truncated below the planned end.
        report_data_loss(
            fail_on_data_loss,
            f"{task.tp}: offset {position} is beyond the log (planned up to {task.end})",
        )
        return task.end
    report_data_loss(
        fail_on_data_loss,
        f"{task.tp}: offsets {position} to {min(log_start, task.end)} were deleted "
        f"(log start offset {log_start})",
    )
    return log_start
