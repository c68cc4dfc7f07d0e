"""The three measures with confluent-kafka (librdkafka), for any Kafka-protocol cluster: Apache
Kafka, and Highwater's Kafka listener. One partition (0) of a topic the peer created, read by
assignment (no group), as Kafka's perf tools and `highwater perf` read it."""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from tests.benchmarks.peers.common import Workload

QUIET = logging.getLogger("tests.benchmarks.peers.confluent_client")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
PARTITION = 0
POLL_EVERY = 1000  # records between the producer's polls for delivery reports


def producer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """acks=all and idempotent; librdkafka's defaults for the rest (`batch.size` 1,000,000
    bytes, `linger.ms` 5 ms as Kafka 4.0's and Highwater's producer's)."""
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "logger": QUIET,
        **overrides,
    }


def consumer_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "bench-peers",  # librdkafka wants one; assign() joins no group
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "logger": QUIET,
    }


class Deliveries:
    """Counts delivery reports; keeps the first error."""

    def __init__(self) -> None:
        self.acknowledged = 0
        self.failed = 0
        self.first_error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.acknowledged += 1
            return
        self.failed += 1
        self.first_error = self.first_error or error


def _send(producer: Producer, topic: str, value: bytes, deliveries: Deliveries) -> None:
    while True:
        try:
            producer.produce(topic, value, partition=PARTITION, on_delivery=deliveries)
            return
        except BufferError:  # librdkafka's queue is full: serve reports, which frees it
            producer.poll(0.001)


def _check(name: str, deliveries: Deliveries, expected: int) -> None:
    if deliveries.failed or deliveries.acknowledged != expected:
        raise SystemExit(
            f"{name}: {deliveries.acknowledged} of {expected} records acknowledged, "
            f"{deliveries.failed} failed: {deliveries.first_error}"
        )


def produce(name: str, bootstrap: str, topic: str, workload: Workload) -> float:
    """Records/s from the first send to the last acknowledgement."""
    producer = Producer(producer_config(bootstrap))
    producer.list_topics(topic, timeout=30)  # connected, metadata known: not timed
    deliveries = Deliveries()
    value = workload.value()
    started = time.perf_counter()
    for sequence in range(workload.records):
        _send(producer, topic, value, deliveries)
        if sequence % POLL_EVERY == 0:
            producer.poll(0)
    left = producer.flush(workload.timeout_s)
    elapsed = time.perf_counter() - started
    if left:
        raise SystemExit(f"{name}: {left} records not delivered in {workload.timeout_s:g} s")
    _check(name, deliveries, workload.records)
    return workload.records / elapsed


def consume(name: str, bootstrap: str, topic: str, workload: Workload) -> float:
    """Records/s of reading workload.records records from the start of the partition."""
    consumer = Consumer(consumer_config(bootstrap))
    try:
        deadline = time.monotonic() + workload.timeout_s
        count = 0
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, PARTITION, OFFSET_BEGINNING)])
        while count < workload.records:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: {count} of {workload.records} records read")
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                error = message.error()
                if error is not None:
                    raise SystemExit(f"{name}: consume: {error}")
                count += 1
        return count / (time.perf_counter() - started)
    finally:
        consumer.close()


def end_to_end(name: str, bootstrap: str, topic: str, workload: Workload) -> list[float]:
    """Produce-to-consume latencies (ms) at workload.rate. The producer's `linger.ms` is 0, as
    Kafka's EndToEndLatency tool sets it and `highwater perf end-to-end` does; one thread sends
    what is due, then waits on the consumer until the next record is due."""
    producer = Producer(producer_config(bootstrap, **{"linger.ms": 0}))
    consumer = Consumer(consumer_config(bootstrap))
    filler = workload.filler()
    total = workload.e2e_records
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    deliveries = Deliveries()
    clock = time.perf_counter
    try:
        producer.list_topics(topic, timeout=30)
        # The topic is new and empty: read from its start, so nothing sent is missed.
        consumer.assign([TopicPartition(topic, PARTITION, OFFSET_BEGINNING)])
        deadline = time.monotonic() + workload.timeout_s
        started, sequence = clock(), 0
        while len(latencies) < total:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: {len(latencies)} of {total} records seen")
            due = min(total, int((clock() - started) * workload.rate) + 1)
            while sequence < due:
                sent_at[sequence] = clock()
                _send(producer, topic, sequence.to_bytes(8, "big") + filler, deliveries)
                sequence += 1
            producer.poll(0)
            wait_s = started + sequence / workload.rate - clock() if sequence < total else 0.1
            message = consumer.poll(max(wait_s, 0.0))
            while message is not None:
                now = clock()
                error = message.error()
                if error is not None:
                    raise SystemExit(f"{name}: consume: {error}")
                value = message.value() or b""
                begun = sent_at.pop(int.from_bytes(value[:8], "big"), None)
                if begun is not None:
                    latencies.append((now - begun) * 1000)
                message = consumer.poll(0)
        producer.flush(workload.timeout_s)
        _check(name, deliveries, total)
    finally:
        consumer.close()
    return sorted(latencies)
