"""`highwater produce TOPIC`: one record per input line (kafka-console-producer, kcat -P).

Before reading input, one Metadata round checks the cluster and the topic (`check_topics`): no
broker or no topic fails once, at once (the producer would wait max.block.ms first). Records
are then sent as lines arrive (`lines.py` splits them in linear time, refusing one over
max.request.size as it streams in); results are reported in input order, and the producer's
retries as warnings (`produce_report.py`). Ctrl-C or SIGTERM stops reading, waits at most
FLUSH_ON_INTERRUPT_S for the records in flight, then closes the producer, which says which
records are in doubt.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, BinaryIO

import click
import trio
from click.core import ParameterSource

from client.cli.common import bootstrap_option, check_topics, cli_security, fail, run_client
from client.cli.format import EnvelopeError, ProducerInput, decode_envelope, split_key
from client.cli.interrupts import Interrupts
from client.cli.lines import LineSplitter, TooLong, unescape
from client.cli.produce_report import (
    BadLine,
    Outcome,
    Sent,
    report,
    retry_warning,
)
from client.cli.properties import PRODUCER_PROPERTIES, PropertyError, parse_properties
from client.cli.refusals import principal_of, producing, refusal_line
from client.cli.topic_args import one_topic, resolve_topic
from client.errors import (
    HighwaterClientError,
    HighwaterTimeoutError,
    NoBrokersAvailable,
    ProducerFatalError,
)
from client.producer import Producer
from client.settings import DELIVERY_TIMEOUT_MS, MAX_REQUEST_SIZE
from protocol.compression import CODECS
from protocol.errors import ErrorCode

__all__ = ["ACKS", "produce"]

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_READ_BYTES = 256 * 1024
_MAX_PENDING_RECORDS = 10_000  # delivery results not yet reported: bounds memory
MAX_BLOCK_MS = 15_000  # how long a send waits for the topic's metadata (or buffer memory)
FLUSH_ON_INTERRUPT_S = 5.0  # after Ctrl-C: how long to wait for acknowledgements
_JSON_LINE_FACTOR = 4  # an envelope line may be this much larger than its record (base64...)
# Errors after which every later record would fail the same way: one line, then stop.
_FATAL = (ProducerFatalError, HighwaterTimeoutError, NoBrokersAvailable)


@dataclass(frozen=True, slots=True)
class _Options:
    topic: str
    key_separator: bytes | None
    partition: int | None
    json_input: bool
    print_offsets: bool
    headers: tuple[tuple[str, bytes | None], ...]
    delimiter: bytes
    max_line_bytes: int
    null_values: frozenset[bytes] = frozenset()  # a value equal to one is sent as null


def _parse_line(line: bytes, options: _Options) -> ProducerInput:
    if options.json_input:
        record = decode_envelope(line)
    elif options.key_separator is not None:
        record = split_key(line, options.key_separator)
    else:
        record = ProducerInput(value=line)
    if record.value in options.null_values:  # a tombstone (kcat -Z, null.marker)
        record = ProducerInput(None, record.key, record.headers, record.timestamp_ms)
    if options.headers:
        record = ProducerInput(
            record.value, record.key, options.headers + record.headers, record.timestamp_ms
        )
    return record


async def _read_records(
    stdin: BinaryIO, splitter: LineSplitter, interrupts: Interrupts
) -> AsyncIterator[bytes | TooLong]:
    """Records as they arrive (interactive input line by line, a pipe in large reads), until
    the end of input or a signal."""
    read = _reader(stdin)
    while True:
        chunk = b""
        with interrupts.scope():
            chunk = await trio.to_thread.run_sync(read, _READ_BYTES, abandon_on_cancel=True)
        if interrupts.interrupted:
            return
        for record in splitter.feed(chunk) if chunk else splitter.finish():
            yield record
        if not chunk:
            return


def _reader(stdin: BinaryIO) -> Callable[[int], bytes]:
    """A blocking read of at most n bytes. From a real file, os.read: the thread left blocked in
    it after a signal holds no lock of Python's buffered stdin, which interpreter shutdown
    would otherwise wait for (and abort on)."""
    try:
        fd = stdin.fileno()
    except (OSError, AttributeError, io.UnsupportedOperation):
        return stdin.read1 if hasattr(stdin, "read1") else stdin.read
    return partial(os.read, fd)


async def _produce(
    bootstrap: str, options: _Options, settings: dict[str, Any], stdin: BinaryIO
) -> Outcome:
    outcome = Outcome(print_offsets=options.print_offsets)
    interrupts = Interrupts()
    results_in, results_out = trio.open_memory_channel[Sent | BadLine](_MAX_PENDING_RECORDS)
    max_block_ms = settings.get("max_block_ms", MAX_BLOCK_MS)
    warn = retry_warning(settings.get("delivery_timeout_ms", DELIVERY_TIMEOUT_MS))
    async with (
        Producer(bootstrap, on_retry=warn, security=cli_security(), **settings) as producer,
        trio.open_nursery() as nursery,
    ):
        abort = partial(producer.aclose, timeout_ms=0)
        await nursery.start(partial(interrupts.watch, grace_s=FLUSH_ON_INTERRUPT_S, abort=abort))
        with interrupts.scope():
            await check_topics(producer.metadata, [options.topic], max_block_ms)
        if not interrupts.interrupted:
            reported = trio.Event()
            nursery.start_soon(report, results_out, outcome, reported)
            async with results_in:
                await _send_records(producer, stdin, options, results_in, interrupts)
                await producer.flush()
            await reported.wait()
        nursery.cancel_scope.cancel()
    outcome.interrupted = interrupts.interrupted
    return outcome


async def _send_records(
    producer: Producer,
    stdin: BinaryIO,
    options: _Options,
    results: trio.MemorySendChannel[Sent | BadLine],
    interrupts: Interrupts,
) -> None:
    splitter = LineSplitter(options.delimiter, options.max_line_bytes)
    line_number = 0
    async for line in _read_records(stdin, splitter, interrupts):
        if interrupts.interrupted:
            return  # what was read before the signal is not sent
        line_number += 1
        if isinstance(line, TooLong):
            message = (
                f"{line.size} bytes, over the {options.max_line_bytes} a line may have "
                f"(max.request.size): not sent"
            )
            await results.send(BadLine(line_number, message, "MESSAGE_TOO_LARGE"))
            continue
        try:
            record = _parse_line(line, options)
        except EnvelopeError as exc:
            await results.send(BadLine(line_number, str(exc)))
            continue
        try:
            with interrupts.scope() as scope:  # cancelled before the record is queued, if at all
                delivery = await producer.send(
                    options.topic,
                    record.value,
                    key=record.key,
                    partition=options.partition,
                    headers=record.headers,
                    timestamp_ms=record.timestamp_ms,
                )
        except _FATAL:
            raise  # every record would fail the same way: one line, not one per record
        except HighwaterClientError as exc:
            await results.send(BadLine(line_number, str(exc), exc.name))
            continue
        if scope.cancelled_caught:
            return
        await results.send(Sent(line_number, delivery))


@click.command()
@bootstrap_option
@one_topic()
@click.option(
    "-K",
    "key_separator",
    metavar="SEP",
    help="Split each line at the first SEP into key and value (a line without SEP fails). "
    "Escapes as for -D.",
)
@click.option(
    "-H",
    "--header",
    "header_options",
    multiple=True,
    metavar="NAME=VALUE",
    help="Add this header to every record (repeatable; NAME alone: a null value).",
)
@click.option(
    "-D",
    "--delimiter",
    default="\\n",
    show_default=True,
    metavar="DELIM",
    help="What ends a record: any string, with the escapes \\n \\t \\r \\0 \\\\ \\xNN.",
)
@click.option(
    "-0", "--null-delimited", is_flag=True, help="Records end with a NUL byte (-D '\\0')."
)
@click.option(
    "-p", "--partition", type=click.IntRange(min=0), help="Send every record to this partition."
)
@click.option(
    "--acks",
    type=click.Choice(list(ACKS)),
    default="all",
    show_default=True,
    help="Acknowledgements the leader waits for (all = -1). Idempotence needs all: with 0 or 1 "
    "it is off.",
)
@click.option(
    "--no-idempotence",
    "no_idempotence",
    is_flag=True,
    help="Send without producer id and sequence numbers: a retry after a lost acknowledgement "
    "may store a record twice.",
)
@click.option(
    "--compression",
    type=click.Choice(list(CODECS)),
    default="none",
    show_default=True,
)
@click.option(
    "-X",
    "--producer-property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any producer setting by Kafka's name, e.g. -X linger.ms=50 -X "
    "delivery.timeout.ms=30000 (repeatable; --acks, --compression and --no-idempotence, when "
    "given, win).",
)
@click.option(
    "-J",
    "--json",
    "json_input",
    is_flag=True,
    help="Each line is the JSON envelope `consume --json` writes (key, value, headers, "
    "timestamp; topic/partition/offset are ignored).",
)
@click.option(
    "--print-offsets",
    is_flag=True,
    help='Print {"partition","offset"} per acknowledged record, {"error"} per failed one.',
)
@click.option(
    "-Z",
    "--null-empty",
    is_flag=True,
    help="Send an empty value as null, a tombstone (kcat's -Z).",
)
@click.option(
    "--null-marker",
    metavar="STR",
    help="Send a value equal to STR as null, a tombstone (the console producer's null.marker).",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="No summary after Ctrl-C (errors are still printed)."
)
@click.pass_context
def produce(
    ctx: click.Context,
    bootstrap: str,
    topic: str | None,
    topic_option: str | None,
    key_separator: str | None,
    header_options: tuple[str, ...],
    delimiter: str,
    null_delimited: bool,
    partition: int | None,
    acks: str,
    compression: str,
    properties: tuple[str, ...],
    json_input: bool,
    print_offsets: bool,
    no_idempotence: bool,
    null_empty: bool,
    null_marker: str | None,
    quiet: bool,
) -> None:
    """Produce one record per line of stdin to TOPIC; exit 1 if any record failed.

    The producer is idempotent (acks all, each record stored once even when a request is
    retried) unless --no-idempotence or --acks 0/1. Ctrl-C stops reading, waits up to 5 s for
    the records in flight and prints how many were acknowledged."""
    topic = resolve_topic(topic, topic_option)
    if key_separator is not None and json_input:
        raise click.UsageError("-K and --json cannot be combined (the envelope holds the key)")
    if json_input and (null_empty or null_marker is not None):
        raise click.UsageError("-Z and --null-marker cannot be combined with --json (its null)")
    if null_delimited and ctx.get_parameter_source("delimiter") is ParameterSource.COMMANDLINE:
        raise click.UsageError("-D and --null-delimited cannot be combined")
    separator = _escaped(key_separator, "-K") if key_separator is not None else None
    record_delimiter = b"\0" if null_delimited else _escaped(delimiter, "-D")
    settings = _settings(ctx, properties, acks, compression, no_idempotence)
    bootstrap = settings.pop("bootstrap", bootstrap)
    max_line_bytes = settings.get("max_request_size", MAX_REQUEST_SIZE)
    options = _Options(
        topic=topic,
        key_separator=separator,
        partition=partition,
        json_input=json_input,
        print_offsets=print_offsets,
        headers=tuple(_header(h) for h in header_options),
        delimiter=record_delimiter,
        max_line_bytes=max_line_bytes * (_JSON_LINE_FACTOR if json_input else 1),
        null_values=frozenset(
            ([b""] if null_empty else [])
            + ([null_marker.encode()] if null_marker is not None else [])
        ),
    )
    attempt = producing(topic)
    outcome = run_client(
        bootstrap,
        _produce,
        bootstrap,
        options,
        settings,
        sys.stdin.buffer,
        timeout_s=None,
        attempt=attempt,
    )
    if outcome.interrupted and not quiet:
        click.echo(outcome.summary(), err=True)
    if outcome.failed or outcome.unknown:
        refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if refused.name in outcome.errors:  # DESCRIBE, but no WRITE: each record refused
            error = HighwaterClientError(refused.name, refused)
            line = refusal_line(error, principal_of(cli_security()), attempt)
            fail(f"{outcome.failure_line()}; {line}" if line else outcome.failure_line())
        fail(outcome.failure_line())


def _escaped(text: str, flag: str) -> bytes:
    try:
        value = unescape(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from exc
    if not value:
        raise click.BadParameter("must not be empty", param_hint=flag)
    return value


def _header(text: str) -> tuple[str, bytes | None]:
    name, found, value = text.partition("=")
    if not name:
        raise click.BadParameter(f"{text!r} has no name (NAME=VALUE)", param_hint="-H")
    return name, value.encode() if found else None


def _settings(
    ctx: click.Context,
    properties: tuple[str, ...],
    acks: str,
    compression: str,
    no_idempotence: bool,
) -> dict[str, Any]:
    """Producer keyword arguments: the CLI's defaults, then -X, then the flags given."""
    try:
        given = parse_properties(properties, PRODUCER_PROPERTIES, "producer")
    except PropertyError as exc:
        raise click.BadParameter(str(exc), param_hint="-X") from exc
    settings: dict[str, Any] = {
        "acks": ACKS[acks],
        # None: on unless acks conflicts (Kafka's default); never forced on here.
        "enable_idempotence": None,
        "compression": compression,
        "max_block_ms": MAX_BLOCK_MS,
        "client_id": "highwater-cli",
        **given,
    }
    if ctx.get_parameter_source("acks") is ParameterSource.COMMANDLINE:
        settings["acks"] = ACKS[acks]
    if ctx.get_parameter_source("compression") is ParameterSource.COMMANDLINE:
        settings["compression"] = compression
    if no_idempotence:
        settings["enable_idempotence"] = False
    return settings
