"""`highwater consume TOPIC`: print records (kcat -C, kafka-console-consumer)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

import click

from client.cli.common import bootstrap_option, run_client
from client.cli.format import (
    DEFAULT_FORMAT,
    FormatError,
    RecordView,
    compile_format,
    encode_envelope,
)
from client.consumer import Consumer, TopicPartition
from client.errors import UnknownTopicError

__all__ = ["consume"]

POLL_TIMEOUT_MS = 500
API_TIMEOUT_MS = 15_000  # topic metadata and ListOffsets: how long before "no such topic"
_MAX_POLL_RECORDS = 500


@dataclass
class _Progress:
    count: int = 0


@dataclass(frozen=True, slots=True)
class _Options:
    topic: str
    partition: int | None
    from_beginning: bool
    offset: int | None
    exit_at_end: bool
    max_messages: int | None


def _json_line(record: RecordView) -> bytes:
    return encode_envelope(record).encode() + b"\n"


async def _reached(consumer: Consumer, ends: Mapping[TopicPartition, int]) -> bool:
    for tp, end in ends.items():
        if await consumer.position(tp) < end:
            return False
    return True


async def _consume(
    bootstrap: str,
    options: _Options,
    render: Callable[[RecordView], bytes],
    out: BinaryIO,
    progress: _Progress,
) -> None:
    """Print records until --max-messages, the end (-e), or Ctrl-C, counting them."""
    topic = options.topic
    async with Consumer(
        bootstrap, client_id="highwater-cli", default_api_timeout_ms=API_TIMEOUT_MS
    ) as consumer:
        partitions = await consumer.partitions_for(topic)
        if options.partition is not None:
            if options.partition not in partitions:
                raise UnknownTopicError(
                    f"UNKNOWN_TOPIC_OR_PARTITION: {topic!r} has no partition {options.partition} "
                    f"(it has {len(partitions)})"
                )
            partitions = (options.partition,)
        tps = [(topic, p) for p in partitions]
        consumer.assign(tps)
        if options.from_beginning:
            consumer.seek_to_beginning(tps)
        elif options.offset is not None:
            for tp in tps:
                consumer.seek(tp, options.offset)
        else:
            consumer.seek_to_end(tps)
        # -e: stop at the end offsets as of now (records produced later are not waited for).
        ends = await consumer.end_offsets(tps) if options.exit_at_end else None
        while options.max_messages is None or progress.count < options.max_messages:
            if ends is not None and await _reached(consumer, ends):
                break
            limit = _MAX_POLL_RECORDS
            if options.max_messages is not None:
                limit = min(limit, options.max_messages - progress.count)
            records = await consumer.poll(timeout_ms=POLL_TIMEOUT_MS, max_records=limit)
            if records:
                out.write(b"".join(render(r) for r in records))
                out.flush()
                progress.count += len(records)


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition.")
@click.option("--from-beginning", is_flag=True, help="Start at each partition's first offset.")
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    help="Start at this offset (in every partition read). Default: the end.",
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
def consume(
    bootstrap: str,
    topic: str,
    partition: int | None,
    from_beginning: bool,
    offset: int | None,
    exit_at_end: bool,
    max_messages: int | None,
    fmt: str | None,
    json_output: bool,
) -> None:
    """Print the records of TOPIC (all partitions unless --partition) to stdout."""
    if from_beginning and offset is not None:
        raise click.UsageError("--from-beginning and --offset cannot be combined")
    if json_output and fmt is not None:
        raise click.UsageError("--format and --json cannot be combined")
    render: Callable[[RecordView], bytes] = _json_line
    if not json_output:
        try:
            render = compile_format(DEFAULT_FORMAT if fmt is None else fmt)
        except FormatError as exc:
            raise click.BadParameter(str(exc), param_hint="--format") from exc
    options = _Options(topic, partition, from_beginning, offset, exit_at_end, max_messages)
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
