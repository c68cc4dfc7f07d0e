"""`highwater consume TOPIC...`: print records (kcat -C, kafka-console-consumer).

One Metadata round first (`check_topics`): no broker or no topic fails once, at once. Then
every partition is placed by `-o` (offsets.py) and read until --max-messages, the stop offsets
(-e, e@TIME), or Ctrl-C/SIGTERM, which end it quietly with the summary line (exit 0).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import click
import trio

from client.cli.common import bootstrap_option, check_topics, cli_security, run_client
from client.cli.format import (
    DEFAULT_FORMAT,
    FormatError,
    RecordView,
    compile_format,
    encode_envelope,
)
from client.cli.interrupts import Interrupts
from client.cli.offsets import OffsetSpec, parse_offsets, seek_start, stop_offsets
from client.cli.properties import CONSUMER_PROPERTIES, PropertyError, parse_properties
from client.consumer import Consumer, ConsumerRecord, TopicPartition
from client.errors import UnknownTopicError

__all__ = ["consume"]

POLL_TIMEOUT_MS = 500
API_TIMEOUT_MS = 15_000  # topic metadata and ListOffsets: how long before giving up
_MAX_POLL_RECORDS = 500


@dataclass
class _Progress:
    count: int = 0


@dataclass(frozen=True, slots=True)
class _Options:
    topics: tuple[str, ...]
    pattern: str | None
    partition: int | None
    offsets: OffsetSpec
    exit_at_end: bool
    max_messages: int | None


def _json_line(record: RecordView) -> bytes:
    return encode_envelope(record).encode() + b"\n"


async def _topics(consumer: Consumer, options: _Options) -> list[str]:
    if options.pattern is None:
        return list(options.topics)
    await consumer.metadata.refresh(all_topics=True)
    matcher = re.compile(options.pattern)
    matched = [t for t in consumer.metadata.topics if matcher.fullmatch(t)]
    if not matched:
        raise UnknownTopicError(f"UNKNOWN_TOPIC_OR_PARTITION: no topic matches {options.pattern!r}")
    return matched


async def _partitions(
    consumer: Consumer, options: _Options, timeout_ms: float
) -> list[TopicPartition]:
    topics = await _topics(consumer, options)
    found = await check_topics(consumer.metadata, topics, timeout_ms)
    if options.partition is None:
        return [TopicPartition(t, p) for t in topics for p in found[t]]
    (topic,) = topics
    if options.partition not in found[topic]:
        raise UnknownTopicError(
            f"UNKNOWN_TOPIC_OR_PARTITION: {topic!r} has no partition {options.partition} "
            f"(it has {len(found[topic])})"
        )
    return [TopicPartition(topic, options.partition)]


async def _consume(
    bootstrap: str,
    options: _Options,
    settings: dict[str, Any],
    render: Callable[[RecordView], bytes],
    out: BinaryIO,
    progress: _Progress,
) -> None:
    """Print records until --max-messages, the stop offsets, or a signal, counting them."""
    interrupts = Interrupts()
    timeout_ms = settings["default_api_timeout_ms"]
    async with (
        Consumer(bootstrap, security=cli_security(), **settings) as consumer,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(interrupts.watch)
        with interrupts.scope():
            tps = await _partitions(consumer, options, timeout_ms)
            consumer.assign(tps)
            reset = settings.get("auto_offset_reset")
            await seek_start(consumer, tps, options.offsets.start, reset)
            stops = await stop_offsets(consumer, tps, options.offsets.stop_ms, options.exit_at_end)
            await _poll_and_print(consumer, options, stops, render, out, progress)
        nursery.cancel_scope.cancel()


async def _poll_and_print(
    consumer: Consumer,
    options: _Options,
    stops: Mapping[TopicPartition, int] | None,
    render: Callable[[RecordView], bytes],
    out: BinaryIO,
    progress: _Progress,
) -> None:
    reading = set(consumer.assignment())
    while options.max_messages is None or progress.count < options.max_messages:
        if stops is not None:
            done = {tp for tp in reading if await consumer.position(tp) >= stops[tp]}
            if done:
                reading -= done
                if not reading:
                    return
                consumer.assign(sorted(reading))  # positions of the rest are kept
        limit = _MAX_POLL_RECORDS
        if options.max_messages is not None:
            limit = min(limit, options.max_messages - progress.count)
        records: Sequence[ConsumerRecord] = await consumer.poll(
            timeout_ms=POLL_TIMEOUT_MS, max_records=limit
        )
        if stops is not None:
            records = [r for r in records if r.offset < stops[TopicPartition(r.topic, r.partition)]]
        if records:
            out.write(b"".join(render(r) for r in records))
            out.flush()
            progress.count += len(records)


@click.command()
@bootstrap_option
@click.argument("topics", nargs=-1)
@click.option("--pattern", help="Consume every topic whose whole name matches this regex.")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition (one topic).")
@click.option(
    "-o",
    "--offset",
    "offset_values",
    multiple=True,
    metavar="OFFSET",
    help="Where to start: beginning, end (default), stored, N, -N (N before the end), "
    "s@TIME (first record at or after TIME); and/or where to stop: e@TIME (before the first "
    "record at or after TIME). TIME: ms since the epoch or ISO-8601.",
)
@click.option("--from-beginning", is_flag=True, help="Same as -o beginning.")
@click.option(
    "--from-timestamp",
    metavar="TIME",
    help="Same as -o s@TIME: ms since the epoch or ISO-8601 (no zone: local time).",
)
@click.option(
    "-e", "--exit-at-end", is_flag=True, help="Exit once the end offsets at start are reached."
)
@click.option("--max-messages", type=click.IntRange(min=1), help="Exit after N records.")
@click.option(
    "--format",
    "fmt",
    help="kcat format: %t topic, %p partition, %o offset, %k key, %s value, %T timestamp, "
    "%h headers, %K key size, %S value size, %% percent; escapes \\n \\t \\r \\0 \\\\. "
    "Default: %s\\n.",
)
@click.option(
    "--json",
    "json_output",
    is_flag=True,
    help='One JSON object per line: {"topic","partition","offset","timestamp","key","value",'
    '"headers"} (bytes that are not UTF-8 go base64 in "key_b64"/"value_b64").',
)
@click.option(
    "-X",
    "--consumer-property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any consumer setting by Kafka's name, e.g. -X fetch.max.wait.ms=100 or -X "
    "auto.offset.reset=earliest (then an offset out of range resets instead of failing).",
)
def consume(
    bootstrap: str,
    topics: tuple[str, ...],
    pattern: str | None,
    partition: int | None,
    offset_values: tuple[str, ...],
    from_beginning: bool,
    from_timestamp: str | None,
    exit_at_end: bool,
    max_messages: int | None,
    fmt: str | None,
    json_output: bool,
    properties: tuple[str, ...],
) -> None:
    """Print the records of TOPICS (all partitions unless --partition) to stdout; the summary
    goes to stderr. Ctrl-C ends it with the summary, exit 0."""
    options = _options(
        topics,
        pattern,
        partition,
        offset_values,
        from_beginning,
        from_timestamp,
        exit_at_end,
        max_messages,
    )
    if json_output and fmt is not None:
        raise click.UsageError("--format and --json cannot be combined")
    render: Callable[[RecordView], bytes] = _json_line
    if not json_output:
        try:
            render = compile_format(DEFAULT_FORMAT if fmt is None else fmt)
        except FormatError as exc:
            raise click.BadParameter(str(exc), param_hint="--format") from exc
    try:
        settings = parse_properties(properties, CONSUMER_PROPERTIES, "consumer")
    except PropertyError as exc:
        raise click.BadParameter(str(exc), param_hint="-X") from exc
    bootstrap = settings.pop("bootstrap", bootstrap)
    settings = {"client_id": "highwater-cli", "default_api_timeout_ms": API_TIMEOUT_MS, **settings}
    out = sys.stdout.buffer
    progress = _Progress()

    def summary() -> None:
        click.echo(f"Processed a total of {progress.count} messages", err=True)

    try:
        run_client(
            bootstrap,
            _consume,
            bootstrap,
            options,
            settings,
            render,
            out,
            progress,
            timeout_s=None,
            on_interrupt=summary,
        )
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python's exit-time flush of
        # stdout from complaining about the same broken pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return
    summary()


def _options(
    topics: tuple[str, ...],
    pattern: str | None,
    partition: int | None,
    offset_values: tuple[str, ...],
    from_beginning: bool,
    from_timestamp: str | None,
    exit_at_end: bool,
    max_messages: int | None,
) -> _Options:
    """The flags checked and combined (UsageError / BadParameter: exit 2)."""
    if bool(topics) == bool(pattern):
        raise click.UsageError("give TOPIC names or --pattern REGEX (one of them)")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise click.BadParameter(str(exc), param_hint="--pattern") from exc
    if partition is not None and (pattern is not None or len(topics) != 1):
        raise click.UsageError("--partition needs exactly one TOPIC")
    values = list(offset_values)
    starts = [v for v in values if not v.strip().startswith("e@")]
    if from_beginning:
        values.append("beginning")
    if from_timestamp is not None:
        values.append(f"s@{from_timestamp}")
    if len(values) - len(offset_values) + min(len(starts), 1) > 1:
        raise click.UsageError(
            "-o (a start offset), --from-beginning and --from-timestamp cannot be combined"
        )
    try:
        spec = parse_offsets(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="-o") from exc
    if spec.start.kind == "stored":
        raise click.UsageError(
            "-o stored needs a consumer group (--group), and consumer groups are not available yet"
        )
    return _Options(topics, pattern, partition, spec, exit_at_end, max_messages)
