"""What a Produce answer's error code means for its batch: a stale leader, a batch that may be
in the log anyway, one refused as too large (Kafka's Sender.completeBatch and canRetry)."""

from __future__ import annotations

from typing import Final

from protocol.errors import ErrorCode

__all__ = ["KNOWN_CODES", "MAYBE_APPENDED", "METADATA_ERRORS", "SUSPECT_LEADER_CODES", "TOO_LARGE"]

# Errors after which our idea of the partition's leader is probably wrong.
METADATA_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
# Answers after which the broker that gave them is asked for metadata last.
SUSPECT_LEADER_CODES: Final = frozenset(
    {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER}
)
# Answers after which a batch may be in the log even though it failed: a resend would be
# deduplicated, but giving its sequence numbers to another batch would not be safe.
MAYBE_APPENDED: Final = frozenset(
    {
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
KNOWN_CODES: Final = frozenset(ErrorCode)  # a code outside these says nothing of the append
# Refusals of a batch as too big, after which it is split into batches of batch_size (KIP-126).
TOO_LARGE: Final = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})
