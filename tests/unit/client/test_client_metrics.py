"""The clients' figures for Python callers: Producer.metrics() and Consumer.metrics() against
the fake cluster (sends, errors, retries, batch sizes, latency; consumer lag = HW - position)."""

from __future__ import annotations

import pytest

from client.client_metrics import ConsumerMetrics, ProducerMetrics
from client.consumer import Consumer
from client.errors import HighwaterClientError
from client.producer import Producer
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from tests.unit.client.fake_broker import FakeCluster
from tests.unit.client.test_consumer import fill, poll_until


async def test_producer_counts_sends_retries_and_errors(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    async with Producer(cluster.bootstrap, retry_backoff_ms=1, linger_ms=0) as producer:
        await (await producer.send("t", b"a" * 50))
        metrics = producer.metrics()
        assert metrics["record-send-total"] == 1
        assert metrics["record-retry-total"] == 1
        assert metrics["record-error-total"] == 0
        assert metrics["request-total"] == 2
        assert metrics["batch-size-avg"] > 50
        assert metrics["request-latency-avg"] > 0
        assert metrics["record-send-rate"] > 0
        cluster.fail_next(ApiKey.PRODUCE, ErrorCode.MESSAGE_TOO_LARGE)
        with pytest.raises(HighwaterClientError):
            await (await producer.send("t", b"b"))
        for value in (b"c", b"d", b"e"):
            await (await producer.send("t", value))
        metrics = producer.metrics()
    assert metrics["record-error-total"] == 1
    assert metrics["record-send-total"] == 4
    assert metrics["records-per-batch-avg"] == 1


async def test_consumer_lag_is_the_high_watermark_minus_the_position(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 2)
    fill(cluster, "t", 0, batches=4, per_batch=10)
    fill(cluster, "t", 1, batches=1, per_batch=5)
    async with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", max_poll_records=15
    ) as consumer:
        consumer.assign([("t", 0), ("t", 1)])
        records = await poll_until(consumer, 15)
        positions = {p: await consumer.position(("t", p)) for p in (0, 1)}
        lag = consumer.lag()
        assert lag == {
            TopicPartition("t", p): consumer.highwater(("t", p)) - positions[p]  # type: ignore[operator]
            for p in (0, 1)
            if consumer.highwater(("t", p)) is not None
        }
        metrics = consumer.metrics()
        assert metrics["records-consumed-total"] == len(records)
        assert metrics["records-lag-max"] == max(lag.values())
        await poll_until(consumer, 45 - len(records))
        assert consumer.lag() == {TopicPartition("t", 0): 0, TopicPartition("t", 1): 0}
        metrics = consumer.metrics()
    assert metrics["records-consumed-total"] == 45
    assert metrics["records-lag:t-0"] == 0 and metrics["records-lag-max"] == 0
    assert metrics["fetch-total"] >= 1 and metrics["bytes-consumed-total"] > 0


def test_rates_are_over_a_trailing_window(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("client.client_metrics.time.monotonic", lambda: now[0])
    metrics = ProducerMetrics()
    metrics.batch_done(records=100, size=1000)
    now[0] += 10
    assert metrics.snapshot()["record-send-rate"] == pytest.approx(10.0)  # since creation
    metrics.batch_done(records=500, size=5000)
    now[0] += 5
    assert metrics.snapshot()["record-send-rate"] == pytest.approx(40.0)
    now[0] += 35  # the window now starts at the newest snapshot >= 30 s old: t=115
    metrics.batch_done(records=700, size=7000)
    assert metrics.snapshot()["record-send-rate"] == pytest.approx(20.0)
    consumer = ConsumerMetrics()
    assert consumer.snapshot({})["records-lag-max"] == 0
