"""What the log checks before it appends (Kafka's LogValidator): request and batch sizes, the
CRC and header coherence of every batch, a producer's batch fields, and (producers only) that
each records section decompresses and decodes in agreement with its header."""

from __future__ import annotations

from typing import Final, NoReturn

from broker.config.log_config import LogConfig
from broker.log.errors import MessageTooLargeError, RecordListTooLargeError
from protocol.compression import check_supported
from protocol.errors import InvalidRecordError
from protocol.record_check import check_records
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    LOG_OVERHEAD_BYTES,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    check_batches,
)

__all__ = [
    "check_headers",
    "check_producer_batch",
    "check_producer_records",
    "raise_bad_request_size",
    "raise_batch_too_large",
    "validate_batches",
]

_UNSUPPORTED_ATTRIBUTES: Final = CONTROL_BIT | TRANSACTIONAL_BIT | TIMESTAMP_TYPE_BIT


def validate_batches(
    records: bytes, config: LogConfig, *, from_producer: bool
) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch, or an error for the first bad one. Followers'
    batches (`from_producer` False) are the leader's, taken as they are, however many bytes
    (KAFKA-17375): the leader may have accepted them under a larger segment.bytes, lowered
    since, and a follower that refused them would never catch up; the log rolls and takes
    them into a segment of their own."""
    if not records or (from_producer and len(records) > config.segment_bytes):
        raise_bad_request_size(records, config)
    headers = check_batches(records)
    check_headers(headers, config, from_producer=from_producer)
    if from_producer:
        check_producer_records(records, headers, config)
    return headers


def raise_bad_request_size(records: bytes, config: LogConfig) -> NoReturn:
    if not records:
        raise InvalidRecordError("no record batches")
    raise RecordListTooLargeError(
        f"{len(records)} bytes in one request, over log.segment.bytes {config.segment_bytes}"
    )


def check_headers(
    headers: list[tuple[int, BatchHeader]], config: LogConfig, *, from_producer: bool
) -> None:
    """Per-batch rules after the CRC check for a producer's batches: size, and their fields.
    A follower's are the leader's, taken as they are: their size too (Kafka's appendAsFollower
    ignores it), as the leader accepted them under a max.message.bytes that may have changed
    since (a follower lowered first, or behind on a batch written before it was lowered)."""
    if not from_producer:
        return
    max_batch_length = config.max_message_bytes - LOG_OVERHEAD_BYTES
    for position, header in headers:
        if header.batch_length > max_batch_length:
            raise_batch_too_large(position, header, config)
        if (
            header.base_offset
            or header.attributes
            or header.record_count != header.last_offset_delta + 1
        ):
            check_producer_batch(position, header)


def raise_batch_too_large(position: int, header: BatchHeader, config: LogConfig) -> NoReturn:
    raise MessageTooLargeError(
        f"batch at byte {position} is {header.size} bytes, "
        f"over message.max.bytes {config.max_message_bytes}"
    )


def check_producer_records(
    records: bytes | memoryview, headers: list[tuple[int, BatchHeader]], config: LogConfig
) -> None:
    """Every batch's records section, decoded (after `check_headers`): a batch that consumers
    could not read is refused, not stored. A record may be at most max.message.bytes; a
    compacted topic keeps the latest record per key, so it refuses records without one
    (INVALID_RECORD, as Kafka's LogValidator)."""
    for position, header in headers:
        check_records(
            records,
            position,
            header,
            max_record_bytes=config.max_message_bytes,
            keyed=config.compact,
        )


def check_producer_batch(position: int, header: BatchHeader) -> None:
    """Rules for batches from producers (followers take the leader's batches as they are)."""
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"batch at byte {position}: base offset {header.base_offset}, must be 0"
        )
    if header.record_count <= 0:  # Kafka's LogValidator; only the cleaner empties a batch
        raise InvalidRecordError(
            f"batch at byte {position}: record_count {header.record_count}: a producer's "
            "batch holds at least one record"
        )
    if header.record_count != header.last_offset_delta + 1:  # Kafka's LogValidator: dense
        raise InvalidRecordError(
            f"batch at byte {position}: record_count {header.record_count} with "
            f"last_offset_delta {header.last_offset_delta}: a producer's offsets are dense"
        )
    if header.attributes & _UNSUPPORTED_ATTRIBUTES:
        raise InvalidRecordError(
            f"batch at byte {position}: transactional, control and log-append-time "
            "batches are not supported"
        )
    if header.attributes & COMPRESSION_MASK:
        check_supported(header.compression)
