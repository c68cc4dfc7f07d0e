"""Apache Kafka's own Java tools (3.9, jars from Maven Central by `make kafka-jars`) against
Highwater's Kafka listener: kafka-topics, kafka-console-producer, kafka-console-consumer and
kafka-consumer-groups, run as their main classes (docs/kafka.md)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from tests.benchmarks.kafka.jars import classpath
from tests.integration.cluster_harness import Cluster
from tests.integration.kafka_wire_cluster import DEADLINE_S, cli, kafka_bootstrap, kafka_cluster
from tests.integration.replication_checks import whole_cluster_around

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS = "kafka.admin.ConfigCommand"


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with kafka_cluster(zookeeper.port, tmp_path_factory.mktemp("kafka-java")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`java ... -cp <Kafka's jars>`: fails (never skips) when `make kafka-jars` did not run."""
    log4j = tmp_path_factory.mktemp("log4j") / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=WARN, stderr\n"
        "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stderr.Target=System.err\n"
        "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stderr.layout.ConversionPattern=%p %c: %m%n\n"
    )
    return ["java", "-Xmx256m", f"-Dlog4j.configuration=file:{log4j}", "-cp", classpath()]


def run(java: list[str], tool: str, *args: str, stdin: bytes = b"") -> str:
    result = subprocess.run(
        [*java, tool, *args], input=stdin, capture_output=True, timeout=DEADLINE_S
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return result.stdout.decode()


def test_kafka_topics_creates_and_describes_as_highwater_does(
    cluster: Cluster, java: list[str]
) -> None:
    bootstrap = ["--bootstrap-server", kafka_bootstrap(cluster)]
    out = run(
        java,
        TOPICS,
        *bootstrap,
        "--create",
        "--topic",
        "jt",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    )
    assert "Created topic jt." in out
    described = run(java, TOPICS, *bootstrap, "--describe", "--topic", "jt")
    ours = json.loads(cli(cluster, "topics", "describe", "jt", "--json").stdout)[0]
    assert f"Topic: jt\tTopicId: {ours['topic_id']}\tPartitionCount: 3" in described  # KIP-516
    for p in ours["partitions"]:
        replicas = ",".join(map(str, p["replicas"]))
        assert (
            f"Partition: {p['partition']}\tLeader: {p['leader']}\tReplicas: {replicas}" in described
        )
    assert "jt" in run(java, TOPICS, *bootstrap, "--list").split()


def test_console_producer_and_consumers_and_consumer_groups(
    cluster: Cluster, java: list[str], tmp_path: Path
) -> None:
    bootstrap = ["--bootstrap-server", kafka_bootstrap(cluster)]
    run(
        java,
        TOPICS,
        *bootstrap,
        "--create",
        "--topic",
        "jc",
        "--partitions",
        "2",
        "--replication-factor",
        "3",
    )
    lines = "".join(f"key{i}\tvalue {i}\n" for i in range(200)).encode()
    run(java, PRODUCER, *bootstrap, "--topic", "jc", "--property", "parse.key=true", stdin=lines)
    # the Java producer is idempotent by default: InitProducerId, then sequenced batches
    read = run(
        java,
        CONSUMER,
        *bootstrap,
        "--topic",
        "jc",
        "--from-beginning",
        "--group",
        "jg",
        "--max-messages",
        "200",
        "--property",
        "print.key=true",
    )
    assert sorted(read.splitlines()) == sorted(f"key{i}\tvalue {i}" for i in range(200))
    # KIP-848's consumer protocol: ConsumerGroupHeartbeat, partitions named by topic id
    read_848 = run(
        java,
        CONSUMER,
        *bootstrap,
        "--topic",
        "jc",
        "--from-beginning",
        "--group",
        "jg848",
        "--consumer-property",
        "group.protocol=consumer",
        "--max-messages",
        "200",
    )
    assert sorted(read_848.splitlines()) == sorted(f"value {i}" for i in range(200))
    one = run(
        java,
        CONSUMER,
        *bootstrap,
        "--topic",
        "jc",
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        "3",
    )
    assert len(one.splitlines()) == 3
    groups = run(java, GROUPS, *bootstrap, "--describe", "--group", "jg")
    rows = [line.split() for line in groups.splitlines() if line.startswith("jg ")]
    assert {(r[1], r[2]) for r in rows} == {("jc", "0"), ("jc", "1")}
    assert all(r[3] == r[4] and r[5] == "0" for r in rows), groups  # committed to the end
    assert "jg" in run(java, GROUPS, *bootstrap, "--list").split()
    # the same records through Highwater's own consumer, byte for byte
    ours = cli(cluster, "consume", "jc", "--from-beginning", "-e", "--format", "%k\t%s\n")
    assert sorted(ours.stdout.decode().splitlines()) == sorted(read.splitlines())


def test_kafka_configs_sets_and_describes_client_quotas(cluster: Cluster, java: list[str]) -> None:
    """kafka-configs' quota commands (AlterClientQuotas, DescribeClientQuotas) on the Kafka
    listener; what they set is what `highwater configs describe` shows."""
    bootstrap = ["--bootstrap-server", kafka_bootstrap(cluster)]
    entity = ["--entity-type", "users", "--entity-name", "jq"]
    out = run(
        java, CONFIGS, *bootstrap, "--alter", *entity, "--add-config", "producer_byte_rate=1024"
    )
    assert "Completed updating config for user jq." in out
    described = run(java, CONFIGS, *bootstrap, "--describe", *entity)
    assert "Quota configs for user-principal 'jq' are producer_byte_rate=1024.0" in described
    ours = cli(cluster, "configs", "describe", "--entity-type", "users", "--entity-name", "jq")
    assert ours.stdout.decode().strip() == (
        "Quota configs for user-principal 'jq' are producer_byte_rate=1024.0"
    )
    run(java, CONFIGS, *bootstrap, "--alter", *entity, "--delete-config", "producer_byte_rate")
    assert "producer_byte_rate" not in run(java, CONFIGS, *bootstrap, "--describe", *entity)
