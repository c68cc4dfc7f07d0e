"""`highwater perf produce|consume|end-to-end`: the benchmark commands (the work: perf_tools.py)."""

from __future__ import annotations

import click

from client.cli import perf_tools
from client.cli.common import bootstrap_option, fail, run_client
from client.cli.produce import ACKS
from client.cli.topic_args import one_topic, resolve_topic
from protocol.compression import CODECS

__all__ = ["perf"]


@click.group()
def perf() -> None:
    """Measure throughput and latency like Kafka's producer-perf and consumer-perf tools."""


@perf.command("produce")
@bootstrap_option
@one_topic()
@click.option("--num-records", type=click.IntRange(min=1), required=True)
@click.option("--record-size", type=click.IntRange(min=0), default=100, show_default=True)
@click.option("--acks", type=click.Choice(list(ACKS)), default="1", show_default=True)
@click.option(
    "--throughput",
    type=float,
    default=-1,
    show_default=True,
    help="Cap on records/s (-1: as fast as possible).",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=16_384, show_default=True)
@click.option("--linger-ms", type=click.FloatRange(min=0), default=5, show_default=True)
@click.option(
    "--compression",
    type=click.Choice(list(CODECS)),
    default="none",
    show_default=True,
)
@click.option(
    "--no-idempotence",
    "no_idempotence",
    is_flag=True,
    help="Send without producer ids and sequences (with --acks all; acks 0/1 never use them).",
)
def perf_produce(
    bootstrap: str,
    topic: str | None,
    topic_option: str | None,
    num_records: int,
    record_size: int,
    acks: str,
    throughput: float,
    batch_size: int,
    linger_ms: float,
    compression: str,
    no_idempotence: bool,
) -> None:
    """Send records and print records/s, MB/s and latency percentiles; then the build-only
    rate of the same batches in this process, and the ratio (not with --throughput). TOPIC
    must exist."""
    name = resolve_topic(topic, topic_option)
    result = run_client(
        bootstrap,
        lambda: perf_tools.run_produce_perf(
            bootstrap,
            name,
            num_records=num_records,
            record_size=record_size,
            acks=ACKS[acks],
            throughput=throughput,
            batch_size=batch_size,
            linger_ms=linger_ms,
            compression=compression,
            enable_idempotence=False if no_idempotence else None,
            echo=click.echo,
        ),
        timeout_s=None,
    )
    click.echo(
        perf_tools.producer_summary_line(result.latencies_ms, result.elapsed_s, result.bytes_total)
    )
    floor = perf_tools.build_only_rate(num_records, record_size, batch_size, compression)
    capped = throughput > 0
    for line in perf_tools.format_ratio("end-to-end", result.rate, "build", floor, capped=capped):
        click.echo(line)
    if result.failed:
        fail(f"{result.failed} of {num_records} records failed; first: {result.first_error}")


@perf.command("consume")
@bootstrap_option
@one_topic()
@click.option("--messages", type=click.IntRange(min=1), required=True, help="Records to read.")
@click.option(
    "--timeout",
    "timeout_ms",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Give up after this many ms without a record.",
)
def perf_consume(
    bootstrap: str, topic: str | None, topic_option: str | None, messages: int, timeout_ms: int
) -> None:
    """Read records from the beginning and print Kafka's consumer-perf line; then the
    decode-only rate of the same batches in this process, and the ratio."""
    name = resolve_topic(topic, topic_option)
    result = run_client(
        bootstrap,
        lambda: perf_tools.run_consume_perf(
            bootstrap, name, messages=messages, timeout_ms=timeout_ms
        ),
        timeout_s=None,
    )
    for line in perf_tools.consumer_lines(
        result.start_wall_s, result.end_wall_s, result.bytes_total, result.count, result.fetch_s
    ):
        click.echo(line)
    buffers = run_client(
        bootstrap,
        lambda: perf_tools.fetch_raw_batches(bootstrap, name, result.ranges),
        timeout_s=120,
    )
    floor = perf_tools.decode_only_rate(buffers)
    for line in perf_tools.format_ratio("consumer", result.rate, "decode", floor):
        click.echo(line)


@perf.command("end-to-end")
@bootstrap_option
@one_topic()
@click.option("--num-records", type=click.IntRange(min=1), default=50_000, show_default=True)
@click.option("--record-size", type=click.IntRange(min=8), default=100, show_default=True)
@click.option("--throughput", type=click.FloatRange(min=1), default=10_000, show_default=True)
@click.option("--acks", type=click.Choice(list(ACKS)), default="all", show_default=True)
@click.option(
    "--linger-ms",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="The producer's linger.ms (0, as Kafka's EndToEndLatency sets it; the Producer's "
    "own default is 5).",
)
@click.option("--no-idempotence", "no_idempotence", is_flag=True, help="Plain producer.")
def perf_end_to_end(
    bootstrap: str,
    topic: str | None,
    topic_option: str | None,
    num_records: int,
    record_size: int,
    throughput: float,
    acks: str,
    linger_ms: float,
    no_idempotence: bool,
) -> None:
    """Produce at a fixed rate while consuming, and print produce-to-consume latency
    percentiles (Kafka's EndToEndLatency, without its one-record-at-a-time lockstep). TOPIC
    must exist; partition 0 is used."""
    name = resolve_topic(topic, topic_option)
    latencies = run_client(
        bootstrap,
        lambda: perf_tools.run_end_to_end_perf(
            bootstrap,
            name,
            num_records=num_records,
            record_size=record_size,
            throughput=throughput,
            acks=ACKS[acks],
            linger_ms=linger_ms,
            enable_idempotence=False if no_idempotence else None,
        ),
        timeout_s=None,
    )
    click.echo(perf_tools.end_to_end_line(latencies, throughput))
