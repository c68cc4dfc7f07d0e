"""`highwater consume TOPIC...`: print records (kcat -C, kafka-console-consumer).

One Metadata round first (`check_topics`): no broker or no topic fails once, at once. Then
every partition is placed by `-o` (offsets.py) and read until --max-messages, the stop offsets
(-e, e@TIME), or Ctrl-C/SIGTERM, which end it quietly with the summary line (exit 0). With
--group G the group assigns the partitions and they resume from its committed offsets
(consume_group.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import click
import trio

from client.cli.common import bootstrap_option, check_topics, cli_security, run_client
from client.cli.consume_group import COMMIT_TIMEOUT_MS, GroupProgress, consume_in_group
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
from client.cli.refusals import consuming
from client.cli.topic_args import resolve_topics, topics_option
from client.consumer import Consumer, ConsumerRecord, TopicPartition
from client.errors import CorruptBatchError, HighwaterClientError, UnknownTopicError
from client.settings import MAX_POLL_RECORDS

__all__ = ["consume"]

POLL_TIMEOUT_MS = 500
API_TIMEOUT_MS = 15_000  # topic metadata and ListOffsets: how long before giving up


@dataclass
class _Progress:
    count: int = 0
    group: GroupProgress | None = None

    def add(self, records: int) -> int:
        self.count += records
        return self.count


@dataclass(frozen=True, slots=True)
class _Options:
    topics: tuple[str, ...]
    pattern: str | None
    partition: int | None
    offsets: OffsetSpec
    exit_at_end: bool
    max_messages: int | None
    group: str | None = None


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
        if progress.group is not None:
            await _consume_in_group(consumer, options, render, out, progress, interrupts)
            nursery.cancel_scope.cancel()
            return
        with interrupts.scope():
            tps = await _partitions(consumer, options, timeout_ms)
            consumer.assign(tps)
            reset = settings.get("auto_offset_reset")
            await seek_start(consumer, tps, options.offsets.start, reset)
            stops = await stop_offsets(consumer, tps, options.offsets.stop_ms, options.exit_at_end)
            await _poll_and_print(consumer, options, stops, render, out, progress)
        nursery.cancel_scope.cancel()


async def _consume_in_group(
    consumer: Consumer,
    options: _Options,
    render: Callable[[RecordView], bytes],
    out: BinaryIO,
    progress: _Progress,
    interrupts: Interrupts,
) -> None:
    group = progress.group
    assert group is not None
    with interrupts.scope():
        if options.pattern is None:
            await check_topics(
                consumer.metadata, list(options.topics), consumer.default_api_timeout_ms
            )
        await consume_in_group(
            consumer,
            options.topics,
            options.pattern,
            options.offsets.stop_ms,
            options.exit_at_end,
            options.max_messages,
            render,
            out,
            group,
            progress.add,
        )
    # Also after Ctrl-C: what was printed is committed, so the next run starts after it.
    with trio.move_on_after(COMMIT_TIMEOUT_MS / 1000 + 1):
        await group.commit_printed(consumer)


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
        limit = MAX_POLL_RECORDS
        if options.max_messages is not None:
            limit = min(limit, options.max_messages - progress.count)
        try:
            records: Sequence[ConsumerRecord] = await consumer.poll(
                timeout_ms=POLL_TIMEOUT_MS, max_records=limit
            )
        except CorruptBatchError as exc:  # one line saying how to read on past it
            raise HighwaterClientError(
                f"{exc}\nTo skip it: highwater consume {exc.topic} --partition {exc.partition} "
                f"-o {exc.next_offset}",
                exc.code,
            ) from exc
        if stops is not None:
            records = [r for r in records if r.offset < stops[TopicPartition(r.topic, r.partition)]]
        if records:
            out.write(b"".join(render(r) for r in records))
            out.flush()
            progress.count += len(records)


@click.command()
@bootstrap_option
@click.argument("topics", nargs=-1)
@topics_option
@click.option("--pattern", help="Consume every topic whose whole name matches this regex.")
@click.option(
    "-p", "--partition", type=click.IntRange(min=0), help="Only this partition (one topic)."
)
@click.option(
    "--group",
    help="Consume as a member of this consumer group: the group assigns the partitions, "
    "they start at its committed offsets (none: auto.offset.reset, -o beginning|end), and "
    "what is printed is committed, so the next run continues after it.",
)
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
@click.option("-c", "--max-messages", type=click.IntRange(min=1), help="Exit after N records.")
@click.option(
    "-f",
    "--format",
    "fmt",
    help="kcat format: %t topic, %p partition, %o offset, %k key, %s value, %T timestamp, "
    "%h headers, %K key size, %S value size, %% percent; escapes \\n \\t \\r \\0 \\\\. "
    "Default: %s\\n.",
)
@click.option(
    "-J",
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
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No summary on stderr (errors and warnings are still printed).",
)
def consume(
    bootstrap: str,
    topics: tuple[str, ...],
    topic_options: tuple[str, ...],
    pattern: str | None,
    partition: int | None,
    group: str | None,
    offset_values: tuple[str, ...],
    from_beginning: bool,
    from_timestamp: str | None,
    exit_at_end: bool,
    max_messages: int | None,
    fmt: str | None,
    json_output: bool,
    properties: tuple[str, ...],
    quiet: bool,
) -> None:
    """Print the records of TOPICS (all partitions unless --partition) to stdout; the summary
    goes to stderr. Ctrl-C ends it with the summary, exit 0."""
    try:
        settings = parse_properties(properties, CONSUMER_PROPERTIES, "consumer")
    except PropertyError as exc:
        raise click.BadParameter(str(exc), param_hint="-X") from exc
    group = group or settings.pop("group_id", None)
    options = _options(
        resolve_topics(topics, topic_options),
        pattern,
        partition,
        offset_values,
        from_beginning,
        from_timestamp,
        exit_at_end,
        max_messages,
        group,
    )
    if json_output and fmt is not None:
        raise click.UsageError("--format and --json cannot be combined")
    render: Callable[[RecordView], bytes] = _json_line
    if not json_output:
        try:
            render = compile_format(DEFAULT_FORMAT if fmt is None else fmt)
        except FormatError as exc:
            raise click.BadParameter(str(exc), param_hint="--format") from exc
    bootstrap = settings.pop("bootstrap", bootstrap)
    settings = {"client_id": "highwater-cli", "default_api_timeout_ms": API_TIMEOUT_MS, **settings}
    progress = _Progress()
    if options.group is not None:
        # The CLI commits exactly what it printed itself (consume_group.py), not positions.
        progress.group = GroupProgress(options.group, settings.pop("enable_auto_commit", True))
        settings["group_id"] = options.group
        settings["enable_auto_commit"] = False
        if "auto_offset_reset" not in settings:
            start = options.offsets.start.kind
            settings["auto_offset_reset"] = "earliest" if start == "beginning" else "latest"
    else:
        for name in ("enable_auto_commit", "group_instance_id", "group_remote_assignor"):
            if name in settings:
                raise click.UsageError(f"-X {_KAFKA_NAMES[name]} needs --group")
    out = sys.stdout.buffer

    def summary() -> None:
        if not quiet:
            click.echo(f"Processed a total of {progress.count} messages", err=True)
        group_summary(progress.group, quiet=quiet)

    # A reader that goes away (`| head`) raises BrokenPipeError out of here: the CLI's entry
    # point (client/cli/main.py) ends the command quietly, without the summary.
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
        attempt=consuming(tuple(options.topics), options.group),
    )
    summary()
    if progress.group is not None and progress.group.commit_error is not None:
        sys.exit(1)


_KAFKA_NAMES = {argument: name for name, (argument, _) in CONSUMER_PROPERTIES.items()}
_SHOWN_COMMITS = 10


def group_summary(group: GroupProgress | None, *, quiet: bool = False) -> None:
    """The group's committed offsets (stderr; not when quiet), or why the last commit failed."""
    if group is None:
        return
    if group.commit_error is not None:
        click.echo(
            f"Warning: the offsets of group {group.group} were not committed: "
            f"{group.commit_error}; a new run prints those records again",
            err=True,
        )
        return
    if quiet:
        return
    if not group.commit:
        click.echo(f"Group {group.group}: nothing committed (enable.auto.commit=false)", err=True)
        return
    if not group.committed:
        return
    shown = sorted(group.committed.items())
    text = ", ".join(f"{tp.topic}-{tp.partition}={offset}" for tp, offset in shown[:_SHOWN_COMMITS])
    more = len(shown) - _SHOWN_COMMITS
    click.echo(
        f"Group {group.group} committed: {text}" + (f" (and {more} more)" if more > 0 else ""),
        err=True,
    )


def _options(
    topics: tuple[str, ...],
    pattern: str | None,
    partition: int | None,
    offset_values: tuple[str, ...],
    from_beginning: bool,
    from_timestamp: str | None,
    exit_at_end: bool,
    max_messages: int | None,
    group: str | None = None,
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
    if group is not None:
        if partition is not None:
            raise click.UsageError(
                "--partition cannot be combined with --group (the group assigns)"
            )
        if spec.start.kind not in ("beginning", "end", "stored"):
            raise click.UsageError(
                "with --group, partitions start at the group's committed offsets: -o N, -N and "
                "s@TIME do not apply (`highwater groups reset-offsets` moves them); -o beginning "
                "or end says where a partition without one starts"
            )
    elif spec.start.kind == "stored":
        raise click.UsageError("-o stored (the group's committed offsets) needs --group GROUP")
    return _Options(topics, pattern, partition, spec, exit_at_end, max_messages, group)
