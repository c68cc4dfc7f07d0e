"""`highwater produce TOPIC`: one record per stdin line (kafka-console-producer, kcat -P)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import click
import trio

from client.cli.common import bootstrap_option, fail, run_client
from client.cli.format import (
    EnvelopeError,
    ProducerInput,
    decode_envelope,
    split_key,
    split_lines,
)
from client.errors import HighwaterClientError, ProducerFatalError, UnknownTopicError
from client.producer import DeliveryFuture, Producer, RecordMetadata

__all__ = ["ACKS", "produce"]

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_READ_BYTES = 64 * 1024
_MAX_PENDING_RECORDS = 10_000  # delivery results not yet reported: bounds memory
MAX_BLOCK_MS = 15_000  # how long a send waits for the topic's metadata (or buffer memory)


@dataclass(frozen=True, slots=True)
class _BadLine:
    line_number: int
    message: str


@dataclass(frozen=True, slots=True)
class _Sent:
    line_number: int
    delivery: DeliveryFuture


@dataclass
class _Outcome:
    sent: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class _Options:
    topic: str
    key_separator: bytes | None
    partition: int | None
    json_input: bool
    print_offsets: bool


def _parse_line(line: bytes, options: _Options) -> ProducerInput:
    if options.json_input:
        return decode_envelope(line)
    if options.key_separator is not None:
        return split_key(line, options.key_separator)
    return ProducerInput(value=line)


async def _read_lines(stdin: BinaryIO) -> AsyncIterator[bytes]:
    """Lines as they arrive: interactive input is sent line by line, a pipe in 64 KiB reads."""
    pending = b""
    while True:
        chunk: bytes = await trio.to_thread.run_sync(
            stdin.read1 if hasattr(stdin, "read1") else stdin.read,
            _READ_BYTES,
            abandon_on_cancel=True,
        )
        lines, pending = split_lines(pending, chunk)
        for line in lines:
            yield line
        if not chunk:
            return


def _echo_json(obj: dict[str, Any]) -> None:
    click.echo(json.dumps(obj, separators=(",", ":")))


async def _delivered(future: DeliveryFuture) -> RecordMetadata:
    # Most results are in by the time we look: skip the checkpoint of awaiting them.
    return future.result() if future.done() else await future


async def _report(
    results: trio.MemoryReceiveChannel[_Sent | _BadLine], options: _Options, outcome: _Outcome
) -> None:
    """Await delivery results in input order; print them; count failures."""
    async with results:
        async for item in results:
            if isinstance(item, _BadLine):
                outcome.failed += 1
                click.echo(f"Error: line {item.line_number}: {item.message}", err=True)
                if options.print_offsets:
                    _echo_json({"error": "INVALID_RECORD", "line": item.line_number})
                continue
            try:
                metadata = await _delivered(item.delivery)
            except HighwaterClientError as exc:
                outcome.failed += 1
                click.echo(f"Error: line {item.line_number}: {exc}", err=True)
                if options.print_offsets:
                    _echo_json({"error": exc.name})
                continue
            outcome.sent += 1
            if options.print_offsets:
                _echo_json({"partition": metadata.partition, "offset": metadata.offset})


async def _produce(
    bootstrap: str,
    options: _Options,
    acks: int,
    compression: str,
    stdin: BinaryIO,
    idempotence: bool,
) -> _Outcome:
    outcome = _Outcome()
    results_in, results_out = trio.open_memory_channel[_Sent | _BadLine](_MAX_PENDING_RECORDS)
    async with (
        Producer(
            bootstrap,
            acks=acks,
            # None: on unless --acks conflicts (Kafka's default); never forced on here.
            enable_idempotence=None if idempotence else False,
            compression=compression,
            max_block_ms=MAX_BLOCK_MS,
            client_id="highwater-cli",
        ) as producer,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_report, results_out, options, outcome)
        async with results_in:
            await _send_lines(producer, stdin, options, results_in)
            await producer.flush()
    return outcome


async def _send_lines(
    producer: Producer,
    stdin: BinaryIO,
    options: _Options,
    results: trio.MemorySendChannel[_Sent | _BadLine],
) -> None:
    line_number = 0
    async for line in _read_lines(stdin):
        line_number += 1
        try:
            record = _parse_line(line, options)
        except EnvelopeError as exc:
            await results.send(_BadLine(line_number, str(exc)))
            continue
        try:
            delivery = await producer.send(
                options.topic,
                record.value,
                key=record.key,
                partition=options.partition,
                headers=record.headers,
                timestamp_ms=record.timestamp_ms,
            )
        except (UnknownTopicError, ProducerFatalError):
            raise  # every record would fail the same way: one line, not one per record
        except HighwaterClientError as exc:
            await results.send(_BadLine(line_number, str(exc)))
            continue
        await results.send(_Sent(line_number, delivery))


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option(
    "-K",
    "key_separator",
    metavar="SEP",
    help="Split each line at the first SEP into key and value (a line without SEP fails).",
)
@click.option(
    "--partition", type=click.IntRange(min=0), help="Send every record to this partition."
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
    type=click.Choice(["none", "gzip", "zstd"]),
    default="none",
    show_default=True,
)
@click.option(
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
def produce(
    bootstrap: str,
    topic: str,
    key_separator: str | None,
    partition: int | None,
    acks: str,
    compression: str,
    json_input: bool,
    print_offsets: bool,
    no_idempotence: bool,
) -> None:
    """Produce one record per line of stdin to TOPIC; exit 1 if any record failed.

    The producer is idempotent (acks all, each record stored once even when a request is
    retried) unless --no-idempotence or --acks 0/1."""
    if key_separator is not None and json_input:
        raise click.UsageError("-K and --json cannot be combined (the envelope holds the key)")
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="-K")
    options = _Options(
        topic=topic,
        key_separator=key_separator.encode() if key_separator is not None else None,
        partition=partition,
        json_input=json_input,
        print_offsets=print_offsets,
    )
    stdin = sys.stdin.buffer
    outcome = run_client(
        bootstrap,
        _produce,
        bootstrap,
        options,
        ACKS[acks],
        compression,
        stdin,
        not no_idempotence,
        timeout_s=None,
    )
    if outcome.failed:
        fail(f"{outcome.failed} of {outcome.sent + outcome.failed} records failed")
