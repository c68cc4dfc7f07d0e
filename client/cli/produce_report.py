"""What `produce` tells the user: delivery results in input order, warnings as it retries.

Each failure's error is printed for its first few records (Kafka's error name and the line),
then counted: a cluster that refuses everything gives a handful of lines, not one per record.
While a partition's records wait for a retry (no leader, a refusal, a lost connection), the
producer's on_retry hook prints a warning, at most one per partition every 5 s (as Kafka's
producer logs LEADER_NOT_AVAILABLE as it retries).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click
import trio

from client.errors import ClientClosedError, HighwaterClientError
from client.producer import DeliveryFuture, RecordMetadata, RetryNotice

__all__ = ["BadLine", "Outcome", "Sent", "report", "retry_warning"]

SHOWN_PER_ERROR = 3  # records whose error is printed in full, per error name


@dataclass(frozen=True, slots=True)
class BadLine:
    """An input line that was not sent."""

    line_number: int
    message: str
    error: str = "INVALID_RECORD"


@dataclass(frozen=True, slots=True)
class Sent:
    line_number: int
    delivery: DeliveryFuture


@dataclass
class Outcome:
    print_offsets: bool = False
    acknowledged: int = 0
    failed: int = 0
    unknown: int = 0  # in flight when the producer was closed: may be in the topic
    errors: Counter[str] = field(default_factory=Counter)
    interrupted: bool = False

    @property
    def total(self) -> int:
        return self.acknowledged + self.failed + self.unknown

    def summary(self) -> str:
        return (
            f"Processed a total of {self.total} records: {self.acknowledged} acknowledged, "
            f"{self.failed} failed, {self.unknown} unknown (no answer before the end)"
        )

    def failure_line(self) -> str:
        counts = ", ".join(f"{name}: {count}" for name, count in self.errors.most_common())
        text = f"{self.failed} of {self.total} records failed"
        if self.unknown:
            text += f", {self.unknown} were not acknowledged in time (they may be in the topic)"
        return f"{text} ({counts})" if counts else text

    def _failure(self, error: str, message: str, extra: Mapping[str, Any]) -> None:
        self.errors[error] += 1
        if self.errors[error] <= SHOWN_PER_ERROR:
            click.echo(f"Error: {message}", err=True)
        elif self.errors[error] == SHOWN_PER_ERROR + 1:
            click.echo(f"Error: more records failed with {error} (counted at the end)", err=True)
        if self.print_offsets:
            _echo_json({"error": error, **extra})


def _echo_json(obj: dict[str, Any]) -> None:
    click.echo(json.dumps(obj, separators=(",", ":")))


async def _delivered(future: DeliveryFuture) -> RecordMetadata:
    # Most results are in by the time we look: skip the checkpoint of awaiting them.
    return future.result() if future.done() else await future


async def report(
    results: trio.MemoryReceiveChannel[Sent | BadLine], outcome: Outcome, done: trio.Event
) -> None:
    """Await delivery results in input order; print them; count them."""
    try:
        async with results:
            async for item in results:
                if isinstance(item, BadLine):
                    outcome.failed += 1
                    message = f"line {item.line_number}: {item.message}"
                    outcome._failure(item.error, message, {"line": item.line_number})
                    continue
                try:
                    metadata = await _delivered(item.delivery)
                except ClientClosedError as exc:
                    if not exc.in_doubt:  # closed before delivery: not in the topic
                        outcome.failed += 1
                        outcome._failure(exc.name, f"line {item.line_number}: {exc}", {})
                        continue
                    outcome.unknown += 1
                    if outcome.print_offsets:
                        _echo_json({"error": exc.name})
                    continue
                except HighwaterClientError as exc:
                    outcome.failed += 1
                    outcome._failure(exc.name, f"line {item.line_number}: {exc}", {})
                    continue
                outcome.acknowledged += 1
                if outcome.print_offsets:
                    _echo_json({"partition": metadata.partition, "offset": metadata.offset})
    finally:
        done.set()


def retry_warning(delivery_timeout_ms: float) -> Callable[[RetryNotice], None]:
    """The producer's on_retry hook: one warning line on stderr per notice."""

    def warn(notice: RetryNotice) -> None:
        records = f"{notice.records_waiting} record{'s' if notice.records_waiting != 1 else ''}"
        click.echo(
            f"WARN: {notice.topic}-{notice.partition}: {notice.error}, retrying ({records} "
            f"waiting, the oldest for {notice.waiting_ms / 1000:.0f} s; they fail after "
            f"delivery.timeout.ms {delivery_timeout_ms:.0f} ms)",
            err=True,
        )

    return warn
