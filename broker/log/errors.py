"""Errors raised by the log engine, each with its Kafka error code."""

from __future__ import annotations

from protocol.errors import ErrorCode, HighwaterError

__all__ = [
    "CorruptIndexError",
    "LogStorageError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "RecordListTooLargeError",
]


class OffsetOutOfRangeError(HighwaterError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class MessageTooLargeError(HighwaterError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(HighwaterError):
    """A request's batches together do not fit in one segment."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class LogStorageError(HighwaterError):
    """The log cannot be used as asked (a broken invariant or a failed disk)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptIndexError(LogStorageError):
    """An index file failed its sanity check; the segment rebuilds it from the log."""
