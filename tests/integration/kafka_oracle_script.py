"""One script of Kafka-client actions (confluent-kafka and kcat), run against any bootstrap:
Highwater's Kafka listener or a real Apache Kafka (tests/integration/test_kafka_oracle.py).
Every answer is recorded with what legitimately differs between two clusters taken out (node
ids, ports, cluster ids, member ids, hosts), so two runs can be compared with `==`."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.integration.kafka_wire_cluster import DEADLINE_S, KCAT

__all__ = ["GROUP", "TOPIC", "Answers", "observe"]

TOPIC = "oracle"
GROUP = "oracle-group"
PARTITIONS = 3
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 12
# CreateTime timestamps the producer sets: the same on both systems (fixed when this module is
# imported), so lookups by time compare exactly. One second apart, in produce order, from an
# hour ago: well inside retention.ms (records years old are deleted by Kafka's next retention
# check, log.retention.check.interval.ms, in the middle of the script).
T0_MS = (int(time.time()) - 3600) * 1000
TAIL = 3  # consume the last TAIL of each partition (librdkafka's RD_KAFKA_OFFSET_TAIL)
OFFSET_TAIL_BASE = -2000

Answers = dict[str, Any]


def observe(bootstrap: str) -> Answers:
    """Run the whole script against `bootstrap`; the answers, normalised."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answers: Answers = {}
    answers["create"] = _create(
        admin, NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    )
    _wait_for_leaders(admin)
    answers["produced"] = _produce(bootstrap)
    answers["watermarks"], answers["by_time"] = _offsets(bootstrap)
    answers["list_offsets"] = _list_offsets(admin)
    answers["from_beginning"] = _consume(bootstrap, OFFSET_BEGINNING, len(answers["produced"]))
    answers["from_tail"] = _consume(bootstrap, OFFSET_TAIL_BASE - TAIL, TAIL * PARTITIONS)
    answers["group"] = _group(admin, bootstrap, len(answers["produced"]))
    answers["topic_configs"] = _topic_configs(admin)
    answers["errors"] = _errors(admin, bootstrap)
    answers["kcat_metadata"] = _kcat_metadata(bootstrap)
    answers["from_end"] = _from_end(bootstrap)
    return answers


# -- topics and records ------------------------------------------------------------------------


def _create(admin: AdminClient, topic: NewTopic) -> str:
    """NONE, or the error's name."""
    (future,) = admin.create_topics([topic], operation_timeout=30).values()
    try:
        future.result(DEADLINE_S)
    except KafkaException as exc:
        return str(exc.args[0].name())
    return "NONE"


def _wait_for_leaders(admin: AdminClient) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == PARTITIONS
            and all(p.leader >= 0 and len(p.isrs) == 3 for p in topic.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"{TOPIC}'s partitions have no leaders with 3 in sync")


def _produce(bootstrap: str) -> list[tuple[Any, ...]]:
    """Keyed records with headers, one idempotent producer per codec; each record's
    (key, partition, offset, error) as its delivery report gave it."""
    reports: list[tuple[Any, ...]] = []
    n = 0
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "compression.type": codec,
                "linger.ms": 5,
            }
        )
        for i in range(RECORDS_PER_CODEC):
            key = f"{codec}-{i}".encode()
            producer.produce(
                TOPIC,
                key=key,
                value=f"value {n} {codec}".encode() * (1 + i),
                headers=[("codec", codec.encode()), ("n", str(n).encode())],
                timestamp=T0_MS + n * 1000,
                on_delivery=_recorder(reports),
            )
            n += 1
        assert producer.flush(DEADLINE_S) == 0, codec
    return sorted(reports, key=lambda r: (r[1], r[2]))  # reports come back per partition


def _recorder(reports: list[tuple[Any, ...]]) -> Callable[[Any, Any], None]:
    def report(error: Any, message: Any) -> None:
        reports.append(
            (
                message.key(),
                message.partition(),
                message.offset(),
                None if error is None else error.name(),
            )
        )

    return report


def _offsets(bootstrap: str) -> tuple[dict[int, tuple[int, int]], dict[str, dict[int, int]]]:
    """get_watermark_offsets per partition; offsets_for_times before the first record, at
    every 10th, and after the last (-1: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "oracle-offsets"})
    try:
        watermarks = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            for p in range(PARTITIONS)
        }
        last = len(CODECS) * RECORDS_PER_CODEC - 1
        times = {"before": T0_MS - 1, "after": T0_MS + (last + 1) * 1000}
        times.update({f"n={n}": T0_MS + n * 1000 for n in range(0, last + 1, 10)})
        by_time = {}
        for name, timestamp in times.items():
            found = consumer.offsets_for_times(
                [TopicPartition(TOPIC, p, timestamp) for p in range(PARTITIONS)], timeout=10
            )
            by_time[name] = {tp.partition: tp.offset for tp in found}
        return watermarks, by_time
    finally:
        consumer.close()


def _list_offsets(admin: AdminClient) -> dict[str, dict[int, tuple[int, int]]]:
    """AdminClient.list_offsets (ListOffsets v7): earliest, latest and max timestamp (-3,
    KIP-734); each partition's (offset, timestamp)."""
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
    }
    answers = {}
    for name, spec in specs.items():
        futures = admin.list_offsets({TopicPartition(TOPIC, p): spec for p in range(PARTITIONS)})
        answers[name] = {
            tp.partition: (f.result(DEADLINE_S).offset, f.result(DEADLINE_S).timestamp)
            for tp, f in futures.items()
        }
    return answers


def _record(message: Any) -> tuple[Any, ...]:
    return (
        message.partition(),
        message.offset(),
        message.key(),
        message.value(),
        tuple(message.headers() or ()),
        message.timestamp(),
    )


def _consume(bootstrap: str, offset: int, count: int) -> list[tuple[Any, ...]]:
    """Assign every partition at `offset` and read `count` records, sorted."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "oracle-assign", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, offset) for p in range(PARTITIONS)])
        return sorted(_read(consumer, count))
    finally:
        consumer.close()


def _read(consumer: Consumer, count: int) -> list[tuple[Any, ...]]:
    records: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(records) < count and time.monotonic() < deadline:
        for message in consumer.consume(100, 0.5):
            assert message.error() is None, message.error()
            records.append(_record(message))
    assert len(records) == count, (len(records), count)
    return records


def _from_end(bootstrap: str) -> list[tuple[Any, ...]]:
    """Assigned at the end (OFFSET_END), then one record produced to each partition: exactly
    those are read."""
    fetching: dict[int, int] = {}  # partition -> next offset, once its fetcher is active

    def statistics(text: str) -> None:
        partitions = json.loads(text)["topics"].get(TOPIC, {}).get("partitions", {})
        for p, state in partitions.items():
            if int(p) >= 0 and state["fetch_state"] == "active":
                fetching[int(p)] = state["next_offset"]

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "oracle-end",
            "enable.auto.commit": False,
            "statistics.interval.ms": 100,
            "stats_cb": statistics,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(PARTITIONS)])
        # The end is looked up (ListOffsets latest) before a partition's fetcher is active. Ready
        # once every fetcher is active at the high watermark: librdkafka's statistics were once
        # seen naming an active fetcher's next offset as 0 while it fetched from the end.
        deadline = time.monotonic() + DEADLINE_S
        while fetching != ends:
            assert time.monotonic() < deadline, f"fetchers active: {fetching}, ends: {ends}"
            assert consumer.consume(10, 0.1) == []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for p in range(PARTITIONS):
            producer.produce(TOPIC, key=b"end", value=b"after the end", partition=p,
                             timestamp=T0_MS)  # fmt: skip
        assert producer.flush(DEADLINE_S) == 0
        records = sorted(_read(consumer, PARTITIONS))
        assert [(r[0], r[1]) for r in records] == sorted(ends.items()), (records, ends)
        return records
    finally:
        consumer.close()


# -- groups ------------------------------------------------------------------------------------


def _group(admin: AdminClient, bootstrap: str, count: int) -> Answers:
    """A subscribed member reads everything, commits, reads its commits back; the group as
    ListGroups and DescribeGroups show it while the member is in it and after it left."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": "oracle-member",
        }
    )
    answers: Answers = {}
    try:
        consumer.subscribe([TOPIC])
        answers["read"] = len(_read(consumer, count))
        committed = consumer.commit(asynchronous=False)
        answers["commit"] = sorted((tp.partition, tp.offset, tp.error) for tp in committed or [])
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        answers["committed"] = sorted(
            (tp.partition, tp.offset) for tp in consumer.committed(tps, timeout=10)
        )
        answers["while_member"] = _describe_group(admin)
        answers["listed_while_member"] = _list_group(admin)
    finally:
        consumer.close()
    answers["after_leaving"] = _describe_group(admin)
    answers["listed_after_leaving"] = _list_group(admin)
    return answers


def _list_group(admin: AdminClient) -> list[tuple[Any, ...]]:
    listed = admin.list_consumer_groups().result(DEADLINE_S)
    return [
        (g.group_id, g.is_simple_consumer_group, str(g.state))
        for g in listed.valid
        if g.group_id == GROUP
    ]


def _describe_group(admin: AdminClient) -> Answers:
    (future,) = admin.describe_consumer_groups([GROUP]).values()
    group = future.result(DEADLINE_S)
    return {
        "state": str(group.state),
        "is_simple": group.is_simple_consumer_group,
        "assignor": group.partition_assignor,
        "members": sorted(
            (
                m.client_id,
                sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions),
            )
            for m in group.members
        ),
        "coordinator_known": group.coordinator is not None and group.coordinator.id >= 0,
    }


# -- configs -----------------------------------------------------------------------------------


def _topic_configs(admin: AdminClient) -> dict[str, tuple[str | None, bool]]:
    """DescribeConfigs of the topic: each name's (value, is_default)."""
    resource = ConfigResource(ResourceType.TOPIC, TOPIC)
    (future,) = admin.describe_configs([resource]).values()
    return {
        name: (entry.value, entry.is_default) for name, entry in future.result(DEADLINE_S).items()
    }


# -- refusals ----------------------------------------------------------------------------------


def _errors(admin: AdminClient, bootstrap: str) -> dict[str, Any]:
    errors: dict[str, Any] = {}
    missing = admin.list_topics("oracle-missing", timeout=10).topics["oracle-missing"]
    errors["metadata_unknown_topic"] = None if missing.error is None else missing.error.name()
    errors["create_invalid_name"] = _create(admin, NewTopic("bad name!", 1, 1))
    errors["create_rf_above_brokers"] = _create(admin, NewTopic("oracle-rf4", 1, 4))
    errors["create_existing"] = _create(admin, NewTopic(TOPIC, 1, 1))
    (deleted,) = admin.delete_topics(["oracle-missing"], operation_timeout=30).values()
    try:
        deleted.result(DEADLINE_S)
        errors["delete_unknown_topic"] = "NONE"
    except KafkaException as exc:
        errors["delete_unknown_topic"] = exc.args[0].name()
    errors["produce_unknown_partition"] = _produce_to_partition(bootstrap, PARTITIONS + 4)
    errors["fetch_out_of_range"] = _fetch_out_of_range(bootstrap)
    errors["consume_unknown_topic"] = _consume_unknown_topic(bootstrap)
    return errors


def _produce_to_partition(bootstrap: str, partition: int) -> str:
    reports: list[tuple[Any, ...]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    try:
        producer.produce(TOPIC, value=b"x", partition=partition, on_delivery=_recorder(reports))
    except KafkaException as exc:  # refused at once where the client already has metadata
        return str(exc.args[0].name())
    producer.flush(DEADLINE_S)
    ((_, _, _, error),) = reports
    return str(error)


def _fetch_out_of_range(bootstrap: str) -> tuple[str, bool]:
    """auto.offset.reset=error and an offset past the end: the consumer's error, and whether
    it names the broker's OFFSET_OUT_OF_RANGE."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "oracle-range", "auto.offset.reset": "error"}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 1_000_000)])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            for message in consumer.consume(10, 0.5):
                error = message.error()
                assert error is not None, _record(message)
                return error.name(), "out of range" in error.str().lower()
        raise AssertionError("no error for an offset past the end")
    finally:
        consumer.close()


def _consume_unknown_topic(bootstrap: str) -> str:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "oracle-unknown",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        consumer.subscribe(["oracle-missing"])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            for message in consumer.consume(10, 0.5):
                if message.error() is not None:
                    return str(message.error().name())
        raise AssertionError("no error for a subscription to a missing topic")
    finally:
        consumer.close()


# -- kcat ----------------------------------------------------------------------------------------


def _kcat_metadata(bootstrap: str) -> Answers:
    """`kcat -L -J`: its shape, brokers and partitions with ids and addresses taken out (each
    address checked to be one of the bootstrap's, each leader one of its replicas)."""
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, "-b", bootstrap, "-L", "-J", "-t", TOPIC],
        capture_output=True,
        timeout=DEADLINE_S,
        check=True,
    )
    metadata = json.loads(result.stdout)
    addresses = set(bootstrap.split(","))
    ids = {b["id"] for b in metadata["brokers"]}
    assert {b["name"] for b in metadata["brokers"]} == addresses, metadata["brokers"]
    assert metadata["originating_broker"]["id"] in ids
    (topic,) = metadata["topics"]
    partitions = []
    for p in topic["partitions"]:
        replicas = [r["id"] for r in p["replicas"]]
        assert p["leader"] in replicas and set(replicas) <= ids, p
        partitions.append(
            (p["partition"], len(replicas), len({r["id"] for r in p["isrs"]}), sorted(p))
        )
    return {
        "keys": sorted(metadata),
        "broker_keys": sorted({k for b in metadata["brokers"] for k in b}),
        "brokers": len(metadata["brokers"]),
        "controller_known": metadata.get("controllerid", -1) in ids,
        "topic_keys": sorted(topic),
        "topic": topic["topic"],
        "partitions": partitions,
    }
