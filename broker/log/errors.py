"""Errors raised by the log engine, each with its Kafka error code."""

from __future__ import annotations

import errno
from typing import Final

from protocol.errors import ErrorCode, HighwaterError

__all__ = [
    "CorruptIndexError",
    "LogStorageError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "RecordListTooLargeError",
    "is_transient",
]

# Out of descriptors or memory: the process's trouble, not the disk's. Such an error is retried
# (the next request, the next housekeeping round) and never takes a log dir offline.
_TRANSIENT_ERRNOS: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.EINTR}
)


def is_transient(error: BaseException | str) -> bool:
    return isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS


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
