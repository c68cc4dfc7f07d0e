"""The peer benchmark's Apache Kafka (tests/benchmarks/kafka): ZooKeeper and 3 brokers from the
jars `make kafka-jars` fetched start, take a topic as the benchmark creates it, carry records
both ways with confluent-kafka, and stop cleanly, leaving no process behind."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from client.cli.zookeeper_server import pid_alive
from tests.benchmarks.kafka.cluster import BROKERS, KafkaCluster, left_running
from tests.benchmarks.kafka.jars import classpath
from tests.benchmarks.peers.confluent_client import (
    PARTITION,
    Deliveries,
    consumer_config,
    producer_config,
)
from tests.benchmarks.peers.kafka_peer import create_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DEADLINE_S = 30
SIGTERM_EXIT = 143  # the JVM's exit after its shutdown hooks ran on SIGTERM


def test_kafka_starts_carries_records_and_stops_leaving_nothing(
    tmp_path: Path, zookeeper_available: None
) -> None:
    try:
        jars = classpath()
    except FileNotFoundError as missing:
        pytest.fail(str(missing))  # make test runs make kafka-jars first: never skip
    values = [f"record-{i}".encode() for i in range(10)]
    cluster = KafkaCluster(tmp_path, jars=jars)
    try:
        cluster.start()
        pids = cluster.pids()
        assert len(pids) == BROKERS + 1 and all(pid_alive(p) for p in pids)
        create_topics(cluster.bootstrap, ["setup"])  # led by broker 1, all 3 in sync

        producer = Producer(producer_config(cluster.bootstrap))
        deliveries = Deliveries()
        for value in values:
            producer.produce("setup", value, partition=PARTITION, on_delivery=deliveries)
        assert producer.flush(DEADLINE_S) == 0
        assert (deliveries.acknowledged, deliveries.failed) == (len(values), 0)

        consumer = Consumer(consumer_config(cluster.bootstrap))
        seen: list[bytes] = []
        try:
            consumer.assign([TopicPartition("setup", PARTITION, OFFSET_BEGINNING)])
            deadline = time.monotonic() + DEADLINE_S
            while len(seen) < len(values) and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None:
                    assert message.error() is None, message.error()
                    seen.append(message.value() or b"")
        finally:
            consumer.close()
        assert seen == values
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    assert [p for p in pids if pid_alive(p)] == []
    assert left_running(tmp_path) == []
    assert cluster.exit_codes == {i: SIGTERM_EXIT for i in range(1, BROKERS + 1)}
    for broker in cluster.brokers.values():
        assert "shut down completed" in (broker.directory / "server.log").read_text()
