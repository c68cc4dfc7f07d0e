"""Real Apache Kafka 3.9 as the oracle for Highwater's Kafka listener: one script of client
actions (tests/integration/kafka_oracle_script.py: confluent-kafka and kcat) runs against a
3-broker Highwater cluster's Kafka listeners, then against a 3-broker Kafka 3.9 in ZooKeeper
mode (tests/benchmarks/kafka/cluster.py, the jars `make kafka-jars` fetches), one system at a
time; the answers must be equal, except where docs/kafka.md ("What differs from Kafka") says
Highwater differs, which is asserted here as documented."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from tests.benchmarks.kafka import jars
from tests.benchmarks.kafka.cluster import KafkaCluster
from tests.integration.kafka_wire_cluster import kafka_bootstrap, kafka_cluster

pytest.importorskip("confluent_kafka")

from tests.integration.kafka_oracle_script import GROUP, TOPIC, Answers, observe

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# Kafka's defaults, but for what Highwater's test cluster has too: topics are made only by
# CreateTopics (auto.create.topics.enable false, Highwater's default), a group's first member
# is not held back 3 s waiting for others (group.initial.rebalance.delay.ms), and the internal
# topics have a few partitions, not 50 each (three brokers loading 150 replicas apiece on a
# shared 2-core machine kept the group coordinator loading past a minute).
KAFKA_OVERRIDES = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}
# Little data here: a small heap each (three brokers and ZooKeeper under 2 GiB).
KAFKA_HEAP = ("-Xms256m", "-Xmx512m")
# Topic configs Kafka 3.9 describes and Highwater does not have (docs/kafka.md, "What differs
# from Kafka"): tiered storage, message down-conversion, replication throttles, per-topic
# compression, the newer timestamp bounds and file-level tuning.
NOT_IN_HIGHWATER = {
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "file.delete.delay.ms",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "segment.jitter.ms",
}


def kafka_classpath() -> str:
    """The Kafka 3.9 jars, fetched with Maven where not cached; a skip naming why when they
    cannot be."""
    if not jars.cached(jars.cache_dir()):
        try:
            jars.fetch()
        except (SystemExit, OSError, subprocess.CalledProcessError) as exc:
            pytest.skip(f"Kafka {jars.KAFKA_VERSION}'s jars cannot be fetched: {exc}")
    return jars.classpath()


@pytest.fixture(scope="module")
def answers(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Answers]]:
    classpath = kafka_classpath()
    directory: Path = tmp_path_factory.mktemp("kafka-oracle")
    with kafka_cluster(zookeeper.port, directory / "highwater") as cluster:
        highwater = observe(kafka_bootstrap(cluster))
    kafka = KafkaCluster(directory / "kafka", KAFKA_OVERRIDES, classpath, heap=KAFKA_HEAP)
    try:
        kafka.start(timeout_s=120)
        theirs = observe(kafka.bootstrap)
    except BaseException:
        print(kafka.logs())
        raise
    finally:
        kafka.stop()
    yield {"highwater": highwater, "kafka": theirs}


def both(answers: dict[str, Answers], key: str) -> tuple[object, object]:
    return answers["highwater"][key], answers["kafka"][key]


def test_creating_producing_every_codec_and_the_watermarks_agree(
    answers: dict[str, Answers],
) -> None:
    ours, theirs = answers["highwater"], answers["kafka"]
    assert ours["create"] == theirs["create"] == "NONE"
    assert len(ours["produced"]) == 60 and {r[3] for r in ours["produced"]} == {None}
    assert ours["produced"] == theirs["produced"]  # each key's partition and offset
    assert ours["watermarks"] == theirs["watermarks"]
    assert sum(high for _, high in ours["watermarks"].values()) == 60


def test_lookups_by_time_and_list_offsets_agree(answers: dict[str, Answers]) -> None:
    ours, theirs = both(answers, "by_time")
    assert ours == theirs
    assert ours["after"] == {0: -1, 1: -1, 2: -1}  # type: ignore[index]
    ours, theirs = both(answers, "list_offsets")
    assert ours == theirs  # earliest, latest, max timestamp (-3): offsets and timestamps


def test_consuming_from_the_beginning_the_tail_and_the_end_agree(
    answers: dict[str, Answers],
) -> None:
    for key, count in (("from_beginning", 60), ("from_tail", 9), ("from_end", 3)):
        ours, theirs = both(answers, key)
        assert ours == theirs, key  # key, value, headers, timestamp and its type, offset
        assert len(ours) == count, key  # type: ignore[arg-type]


def test_a_group_consumes_commits_and_is_described_alike(answers: dict[str, Answers]) -> None:
    ours, theirs = both(answers, "group")
    assert ours == theirs
    assert ours["read"] == 60  # type: ignore[index]
    assert ours["listed_while_member"] == [(GROUP, False, "ConsumerGroupState.STABLE")]  # type: ignore[index]
    assert ours["while_member"]["members"] == [  # type: ignore[index]
        ("oracle-member", [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)])
    ]
    assert ours["after_leaving"]["state"] == "ConsumerGroupState.EMPTY"  # type: ignore[index]


def test_topic_configs_are_kafkas_less_the_documented_ones(answers: dict[str, Answers]) -> None:
    ours, theirs = both(answers, "topic_configs")
    assert isinstance(ours, dict) and isinstance(theirs, dict)
    assert set(theirs) - set(ours) == NOT_IN_HIGHWATER
    assert set(ours) <= set(theirs)
    assert {k: theirs[k] for k in ours} == ours  # each value, and whether it is the default
    assert ours["min.insync.replicas"] == ("2", False)


def test_refusals_agree(answers: dict[str, Answers]) -> None:
    ours, theirs = both(answers, "errors")
    assert ours == theirs
    assert ours == {
        "metadata_unknown_topic": "UNKNOWN_TOPIC_OR_PART",
        "create_invalid_name": "TOPIC_EXCEPTION",  # INVALID_TOPIC_EXCEPTION (17)
        "create_rf_above_brokers": "INVALID_REPLICATION_FACTOR",
        "create_existing": "TOPIC_ALREADY_EXISTS",
        "delete_unknown_topic": "UNKNOWN_TOPIC_OR_PART",
        "produce_unknown_partition": "_UNKNOWN_PARTITION",  # the client's, from metadata
        "fetch_out_of_range": ("_AUTO_OFFSET_RESET", True),  # names OFFSET_OUT_OF_RANGE
        "consume_unknown_topic": "UNKNOWN_TOPIC_OR_PART",
    }


def test_kcat_metadata_has_the_same_shape(answers: dict[str, Answers]) -> None:
    ours, theirs = both(answers, "kcat_metadata")
    assert ours == theirs
    assert ours["brokers"] == 3 and ours["controller_known"]  # type: ignore[index]
    assert [p[:3] for p in ours["partitions"]] == [(0, 3, 3), (1, 3, 3), (2, 3, 3)]  # type: ignore[index]
