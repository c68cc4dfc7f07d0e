"""Kafka's perf tools as the peer benchmark runs them: their command lines, and their output
(in the formats of Kafka 3.9's ProducerPerformance, ConsumerPerformance and EndToEndLatency)
parsed into figures, with short or missing output refused."""

from __future__ import annotations

import pytest

from tests.benchmarks.peers import kafka_tools

PRODUCER_OUT = """\
312345 records sent, 62469.0 records/sec (5.96 MB/sec), 201.3 ms avg latency, 512.0 ms max latency.
1000000 records sent, 70921.985816 records/sec (6.76 MB/sec), 190.52 ms avg latency, 611.00 ms max latency, 170 ms 50th, 420 ms 95th, 560 ms 99th, 600 ms 99.9th.
"""  # noqa: E501
CONSUMER_OUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-12-02 06:50:00:000, 2026-12-02 06:50:05:000, 95.3674, 19.0735, 1000000, 200000.0000, 3012, 1988, 47.9715, 503018.1087
"""  # noqa: E501
END_TO_END_OUT = """\
0\t35.12
1000\t1.02
Avg latency: 1.4321 ms
Percentiles: 50th = 1, 99th = 4, 99.9th = 12
"""


def test_the_producer_summary_gives_rate_and_latencies() -> None:
    assert kafka_tools.parse_producer(PRODUCER_OUT, 1_000_000) == {
        "rate": 70921.985816,
        "avg": 190.52,
        "p50": 170.0,
        "p99": 560.0,
        "p99.9": 600.0,
    }


def test_a_producer_run_that_sent_fewer_records_is_refused() -> None:
    with pytest.raises(ValueError, match="sent 1000000 of 2000000"):
        kafka_tools.parse_producer(PRODUCER_OUT, 2_000_000)


def test_producer_output_without_a_summary_is_refused() -> None:
    with pytest.raises(ValueError, match="no ProducerPerformance summary"):
        kafka_tools.parse_producer(PRODUCER_OUT.splitlines()[0], 1_000_000)


def test_the_consumer_line_gives_both_rates() -> None:
    assert kafka_tools.parse_consumer(CONSUMER_OUT, 1_000_000) == {
        "rate": 200000.0,
        "fetch_rate": 503018.1087,
    }


def test_a_consumer_run_that_timed_out_short_is_refused() -> None:
    with pytest.raises(ValueError, match="read 1000000 of 1000001"):
        kafka_tools.parse_consumer(CONSUMER_OUT, 1_000_001)
    with pytest.raises(ValueError, match="no ConsumerPerformance figures"):
        kafka_tools.parse_consumer("WARNING: Exiting before consuming", 1)


def test_end_to_end_gives_average_and_percentiles() -> None:
    assert kafka_tools.parse_end_to_end(END_TO_END_OUT) == {
        "avg": 1.4321,
        "p50": 1.0,
        "p99": 4.0,
        "p99.9": 12.0,
    }
    with pytest.raises(ValueError, match="no EndToEndLatency summary"):
        kafka_tools.parse_end_to_end("0\t35.12\n")


def test_commands_name_the_tool_and_its_arguments() -> None:
    args = kafka_tools.producer_args("h:1", "t", 10, 100)
    command = kafka_tools.java_command("java", "a.jar:b.jar", kafka_tools.PRODUCER, args)
    assert command[:4] == ["java", "-Xmx512M", "-cp", "a.jar:b.jar"]
    assert command[4:] == [
        kafka_tools.PRODUCER, "--topic", "t", "--num-records", "10", "--record-size", "100",
        "--throughput", "-1", "--producer-props", "bootstrap.servers=h:1", "acks=all",
    ]  # fmt: skip
    assert kafka_tools.consumer_args("h:1", "t", 10, 5000) == [
        "--bootstrap-server", "h:1", "--topic", "t", "--messages", "10", "--timeout", "5000",
    ]  # fmt: skip
    assert kafka_tools.end_to_end_args("h:1", "t", 10, 100) == ["h:1", "t", "10", "all", "100"]


def test_the_table_puts_the_ratio_of_medians_on_each_row() -> None:
    one = kafka_tools.figures(PRODUCER_OUT, CONSUMER_OUT, END_TO_END_OUT, 1_000_000)
    assert one["produce.rate"] == 70921.985816 and one["e2e.p99.9"] == 12.0
    slower = {key: value * 2 for key, value in one.items()}
    text = kafka_tools.render([one, slower, one], [slower])
    lines = text.splitlines()
    assert len(lines) == 1 + len(kafka_tools.ROWS)
    produce = lines[1]
    assert produce.startswith("kafka-producer-perf-test (rec/s)")
    assert "70,922.0 (70,922.0-141,844.0)" in produce
    assert produce.endswith("0.50")
    assert lines[-1].startswith("  p99.9 (ms)") and lines[-1].endswith("0.50")
