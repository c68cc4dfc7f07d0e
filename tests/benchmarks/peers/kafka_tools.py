"""Kafka's own performance tools, from the jars `make kafka-jars` fetched, as commands and as
parsed output: ProducerPerformance (kafka-producer-perf-test), ConsumerPerformance
(kafka-consumer-perf-test) and EndToEndLatency (kafka.tools.EndToEndLatency, which in 3.9 runs
org.apache.kafka.tools.EndToEndLatency). The same commands run against Apache Kafka and
against Highwater's Kafka listener (kafka_tools_run.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tests.benchmarks.peers.table import Spread

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
END_TO_END = "org.apache.kafka.tools.EndToEndLatency"
# kafka-run-class.sh's heap for the tools.
TOOL_HEAP = ("-Xmx512M",)

# ProducerPerformance's last line: "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg
# latency, %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."
_PRODUCER_TOTAL = re.compile(
    r"(?P<sent>\d+) records sent, (?P<rate>[\d.]+) records/sec \([\d.]+ MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, [\d.]+ ms max latency, (?P<p50>\d+) ms 50th, "
    r"\d+ ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\."
)
_CONSUMER_HEADER = "start.time, end.time"
_END_TO_END_AVG = re.compile(r"^Avg latency: (?P<avg>[\d.]+) ms$", re.MULTILINE)
_END_TO_END_PERCENTILES = re.compile(
    r"^Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99\.9th = (?P<p999>\d+)$",
    re.MULTILINE,
)


def java_command(java: str, jars: str, main_class: str, args: Sequence[str]) -> list[str]:
    return [java, *TOOL_HEAP, "-cp", jars, main_class, *args]


def producer_args(bootstrap: str, topic: str, records: int, record_size: int) -> list[str]:
    """As `kafka-producer-perf-test --throughput -1` (as fast as it goes) with acks=all; the
    producer's other settings are its defaults (idempotent, linger.ms 5 in 3.9)."""
    return [
        "--topic", topic, "--num-records", str(records), "--record-size", str(record_size),
        "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
    ]  # fmt: skip


def consumer_args(bootstrap: str, topic: str, records: int, timeout_ms: int) -> list[str]:
    """As `kafka-consumer-perf-test`: a consumer in a group of its own (the tool names it),
    from the earliest offset, until `records` are read or nothing came for `timeout_ms`."""
    return [
        "--bootstrap-server", bootstrap, "--topic", topic,
        "--messages", str(records), "--timeout", str(timeout_ms),
    ]  # fmt: skip


def end_to_end_args(bootstrap: str, topic: str, records: int, record_size: int) -> list[str]:
    """EndToEndLatency's positional arguments: broker_list topic num_messages producer_acks
    message_size_bytes. It sends one record, waits to consume it, then sends the next."""
    return [bootstrap, topic, str(records), "all", str(record_size)]


def parse_producer(out: str, records: int) -> dict[str, float]:
    """The summary line's records/sec, average and percentile latencies (ms)."""
    found = _PRODUCER_TOTAL.search(out)
    if found is None:
        raise ValueError(f"no ProducerPerformance summary in:\n{out}")
    if int(found["sent"]) != records:
        raise ValueError(f"ProducerPerformance sent {found['sent']} of {records} records")
    return {
        "rate": float(found["rate"]),
        "avg": float(found["avg"]),
        "p50": float(found["p50"]),
        "p99": float(found["p99"]),
        "p99.9": float(found["p999"]),
    }


def parse_consumer(out: str, records: int) -> dict[str, float]:
    """nMsg.sec (records over the whole run, the group join included) and fetch.nMsg.sec
    (records over the time after the first assignment), from the line after the header."""
    lines = out.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.startswith(_CONSUMER_HEADER):
            names = [n.strip() for n in line.split(",")]
            values = dict(zip(names, (v.strip() for v in lines[index + 1].split(",")), strict=True))
            consumed = int(values["data.consumed.in.nMsg"])
            if consumed < records:
                raise ValueError(f"ConsumerPerformance read {consumed} of {records} records")
            return {
                "rate": float(values["nMsg.sec"]),
                "fetch_rate": float(values["fetch.nMsg.sec"]),
            }
    raise ValueError(f"no ConsumerPerformance figures in:\n{out}")


def parse_end_to_end(out: str) -> dict[str, float]:
    """The average latency (ms) and the 50th, 99th and 99.9th percentiles (whole ms)."""
    avg = _END_TO_END_AVG.search(out)
    percentiles = _END_TO_END_PERCENTILES.search(out)
    if avg is None or percentiles is None:
        raise ValueError(f"no EndToEndLatency summary in:\n{out}")
    return {
        "avg": float(avg["avg"]),
        "p50": float(percentiles["p50"]),
        "p99": float(percentiles["p99"]),
        "p99.9": float(percentiles["p999"]),
    }


# (figure key, label, unit) in the order the table prints them; the tool's name first.
ROWS = (
    ("produce.rate", "kafka-producer-perf-test", "rec/s"),
    ("produce.p50", "  producer latency p50", "ms"),
    ("produce.p99", "  producer latency p99", "ms"),
    ("consume.rate", "kafka-consumer-perf-test nMsg.sec", "rec/s"),
    ("consume.fetch_rate", "  fetch.nMsg.sec", "rec/s"),
    ("e2e.avg", "EndToEndLatency avg", "ms"),
    ("e2e.p50", "  p50", "ms"),
    ("e2e.p99", "  p99", "ms"),
    ("e2e.p99.9", "  p99.9", "ms"),
)


def figures(producer: str, consumer: str, end_to_end: str, records: int) -> dict[str, float]:
    """One run's figures, keyed as ROWS, from the three tools' output."""
    parsed = {
        "produce": parse_producer(producer, records),
        "consume": parse_consumer(consumer, records),
        "e2e": parse_end_to_end(end_to_end),
    }
    return {
        f"{tool}.{name}": value for tool, values in parsed.items() for name, value in values.items()
    }


def render(highwater: list[dict[str, float]], kafka: list[dict[str, float]]) -> str:
    """A row a figure: Highwater's Kafka listener and Kafka, each the median over runs with the
    range, and the ratio of the medians (Highwater / Kafka: above 1 is ahead on a rate, behind
    on a latency)."""
    header = f"{'':<42}{'Highwater (Kafka listener)':>34}{'Kafka 3.9.2':>34}{'HW/Kafka':>10}"
    lines = [header]
    for key, label, unit in ROWS:
        ours = Spread.of([run[key] for run in highwater])
        theirs = Spread.of([run[key] for run in kafka])
        ratio = f"{ours.median / theirs.median:.2f}" if theirs.median else "-"
        lines.append(
            f"{label + ' (' + unit + ')':<42}{_cell(ours):>34}{_cell(theirs):>34}{ratio:>10}"
        )
    return "\n".join(lines)


def _cell(spread: Spread) -> str:
    return f"{spread.median:,.1f} ({spread.low:,.1f}-{spread.high:,.1f})"
