"""The exceptions the client library raises.

Every failure a caller sees is a `HighwaterClientError`. Broker-reported failures carry the Kafka
error code (`.code`) and start their message with its name (`NOT_LEADER_OR_FOLLOWER: ...`), so a
CLI can print one line and a program can branch on the code. Client-side failures (no broker
reachable, a wait that ran out) have `.code` None unless a Kafka code fits them exactly.

A connection that fails or breaks raises `BrokerConnectionError` (a ConnectionError; the
clients retry it or turn it into one of the above), `AuthenticationFailedError` when TLS or SASL
refused it.

`ProducerFatalError` and its subclasses end an idempotent producer: once one is raised, every
record still pending in that Producer fails with it, and so does every later `send()`.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

__all__ = [
    "AuthenticationFailedError",
    "BrokerConnectionError",
    "ClientClosedError",
    "CommitFailedError",
    "CorruptBatchError",
    "HighwaterClientError",
    "HighwaterTimeoutError",
    "LogTruncationError",
    "NoBrokersAvailable",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerFatalError",
    "ProducerFencedError",
    "UnknownProducerIdError",
    "UnknownTopicError",
    "error_for_code",
]


class HighwaterClientError(Exception):
    """A client operation failed; `.code` is the broker's Kafka error code when there is one."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def name(self) -> str:
        """Kafka's name for the error (the code's name), or the exception class name."""
        return self.code.name if self.code is not None else type(self).__name__

    @property
    def retriable(self) -> bool:
        return self.code is not None and self.code.retriable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}: {self.args[0] if self.args else ''})"


class BrokerConnectionError(ConnectionError):
    """The connection failed, broke, or a request on it timed out (and the stream was dropped)."""


class AuthenticationFailedError(BrokerConnectionError):
    """The TLS handshake failed (e.g. an untrusted certificate) or the broker refused the
    SASL login: retrying unchanged will not help. `code` is Kafka's (SSL failures:
    SASL_AUTHENTICATION_FAILED too, as Kafka's SslAuthenticationException has no code)."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED):
        super().__init__(message)
        self.code = code


class NoBrokersAvailable(HighwaterClientError):
    """No bootstrap or known broker answered within the time allowed."""


class UnknownTopicError(HighwaterClientError):
    """The topic (or partition) does not exist in the cluster's metadata."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class HighwaterTimeoutError(HighwaterClientError):
    """A bounded wait ran out (Kafka's TimeoutException): delivery, metadata, buffer memory."""

    def __init__(self, message: str, code: ErrorCode | None = ErrorCode.REQUEST_TIMED_OUT) -> None:
        super().__init__(message, code)


class ClientClosedError(HighwaterClientError):
    """The producer/consumer/admin was closed, or never started (use `async with`).

    For a record the producer's close failed (Kafka: "closed forcefully"), `in_doubt` says
    whether a request carrying it went unanswered: then it may be in the topic; if not, it
    certainly is not."""

    def __init__(
        self, message: str, code: ErrorCode | None = None, *, in_doubt: bool = False
    ) -> None:
        super().__init__(message, code)
        self.in_doubt = in_doubt


class CommitFailedError(HighwaterClientError):
    """An offset commit the coordinator refused for good (Kafka's CommitFailedException): the
    member is no longer in the group (fenced, removed after its timeouts), or, for a commit
    from outside the group, the group has active members (UNKNOWN_MEMBER_ID)."""

    def __init__(self, message: str, code: ErrorCode | None = ErrorCode.UNKNOWN_MEMBER_ID) -> None:
        super().__init__(message, code)


class OffsetOutOfRangeError(HighwaterClientError):
    """A fetch position is outside the log and auto_offset_reset is "none"."""

    def __init__(self, message: str, positions: dict[tuple[str, int], int]) -> None:
        super().__init__(message, ErrorCode.OFFSET_OUT_OF_RANGE)
        self.positions = positions


class LogTruncationError(HighwaterClientError):
    """The consumer's position is past where its partition's new leader's log diverges from
    what was consumed (KIP-320): records up to the position may have been lost or replaced.

    Raised instead of silently skipping or re-reading; `seek()` to continue, e.g. to
    `divergent_offset` (Kafka's consumer seeks there itself when auto.offset.reset is set).
    """

    def __init__(self, topic: str, partition: int, position: int, divergent_offset: int) -> None:
        super().__init__(
            f"log truncation detected on {topic}-{partition}: after a leader change the "
            f"leader's log no longer holds every record consumed before position {position}; "
            f"the first offset known to diverge is {divergent_offset} (records from there on "
            f"were lost or replaced); seek() to continue"
        )
        self.topic = topic
        self.partition = partition
        self.position = position
        self.divergent_offset = divergent_offset


class CorruptBatchError(HighwaterClientError):
    """A fetched batch cannot be read (CORRUPT_MESSAGE): it does not decompress or decode, or
    its CRC does not match. A leader refuses such batches, so it was stored by an older version
    or damaged on disk. The consumer stops at it; `seek()` to `next_offset` skips the batch
    (Kafka's consumer asks the same: "seek past the record to continue consumption")."""

    def __init__(
        self, topic: str, partition: int, offset: int, next_offset: int, reason: str
    ) -> None:
        super().__init__(
            f"CORRUPT_MESSAGE: {topic}-{partition}: the batch at offset {offset} cannot be "
            f"read ({reason}); seek to offset {next_offset} to skip it",
            ErrorCode.CORRUPT_MESSAGE,
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.next_offset = next_offset
        self.reason = reason


class ProducerFatalError(HighwaterClientError):
    """The idempotent producer can no longer promise "each record once, in order per partition"
    (a sequence or epoch error, or a batch whose fate the broker never told us). The batch that
    hit it, every other pending record and every later `send()` fail with it: close this
    Producer and create a new one. (Kafka recovers from some of these by bumping the producer
    epoch; Highwater stops instead.) `.code` is the broker's code when it sent one."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message, code)


class OutOfOrderSequenceError(ProducerFatalError):
    """The partition leader saw a gap in the producer's sequence numbers for the batch that was
    next in sequence: records were lost between producer and log (Kafka's
    OutOfOrderSequenceException)."""

    def __init__(
        self, message: str, code: ErrorCode | None = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    ) -> None:
        super().__init__(message, code)


class ProducerFencedError(ProducerFatalError):
    """The broker knows a newer epoch of this producer id (INVALID_PRODUCER_EPOCH)."""

    def __init__(
        self, message: str, code: ErrorCode | None = ErrorCode.INVALID_PRODUCER_EPOCH
    ) -> None:
        super().__init__(message, code)


class UnknownProducerIdError(ProducerFatalError):
    """The partition leader no longer has this producer's state (it expired): it cannot tell a
    retry from a new batch any more (UNKNOWN_PRODUCER_ID)."""

    def __init__(
        self, message: str, code: ErrorCode | None = ErrorCode.UNKNOWN_PRODUCER_ID
    ) -> None:
        super().__init__(message, code)


_CLASS_FOR_CODE: dict[ErrorCode, type[ProducerFatalError]] = {
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequenceError,
    ErrorCode.INVALID_PRODUCER_EPOCH: ProducerFencedError,
    ErrorCode.UNKNOWN_PRODUCER_ID: UnknownProducerIdError,
}


def error_for_code(
    code: int, context: str, broker_message: str | None = None
) -> HighwaterClientError:
    """The exception for a broker error code: "NAME: context (broker's message)"."""
    try:
        error_code = ErrorCode(code)
    except ValueError:
        return HighwaterClientError(f"unknown error code {code}: {context}")
    message = f"{error_code.name}: {context}"
    if broker_message:
        message += f" ({broker_message})"
    if error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return UnknownTopicError(message)
    fatal = _CLASS_FOR_CODE.get(error_code)
    if fatal is not None:
        return fatal(message)
    return HighwaterClientError(message, error_code)
