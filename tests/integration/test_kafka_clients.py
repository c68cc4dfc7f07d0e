"""Kafka clients nobody here wrote, against a 3-broker cluster's Kafka listeners (docs/kafka.md):
Debian's kcat and confluent-kafka (both librdkafka), and raw frames for the refusals."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from protocol.framing import NEED_DATA, FrameDecoder
from tests.integration.cluster_harness import Cluster, wait_until
from tests.integration.kafka_wire_cluster import (
    DEADLINE_S,
    cli,
    create_topic,
    kafka_bootstrap,
    kafka_cluster,
    kcat,
)
from tests.integration.replication_checks import whole_cluster_around

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with kafka_cluster(zookeeper.port, tmp_path_factory.mktemp("kafka-clients")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


def test_kcat_metadata_agrees_with_topics_describe(cluster: Cluster) -> None:
    create_topic(cluster, "k-meta")
    ours = json.loads(cli(cluster, "topics", "describe", "k-meta", "--json").stdout)[0]
    theirs = json.loads(kcat(cluster, "-L", "-J", "-t", "k-meta").stdout)
    brokers = {b["id"]: b["name"] for b in theirs["brokers"]}
    assert brokers == {i: f"127.0.0.1:{b.port_of('KAFKA')}" for i, b in cluster.brokers.items()}
    (topic,) = theirs["topics"]
    assert topic["topic"] == "k-meta"
    seen = {
        p["partition"]: (
            p["leader"],
            [r["id"] for r in p["replicas"]],
            sorted(r["id"] for r in p["isrs"]),
        )
        for p in topic["partitions"]
    }
    assert seen == {
        p["partition"]: (p["leader"], p["replicas"], sorted(p["isr"])) for p in ours["partitions"]
    }


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produces_each_codec_and_reads_it_back(cluster: Cluster, codec: str) -> None:
    topic = f"k-codec-{codec}"
    create_topic(cluster, topic, partitions=1)
    lines = b"".join(b"key%d:value %d\n" % (i, i) for i in range(2000))
    kcat(cluster, "-P", "-t", topic, "-p", "0", "-z", codec, "-K:", "-H", "h1=v1", stdin=lines)
    out = kcat(
        cluster, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o|%k|%s|%h\n"
    ).stdout.decode()
    assert out.splitlines() == [f"{i}|key{i}|value {i}|h1=v1" for i in range(2000)]
    # the last 10 (ListOffsets latest), and from a timestamp (ListOffsets by time)
    tail = kcat(cluster, "-C", "-t", topic, "-p", "0", "-o", "-10", "-e", "-f", "%o\n").stdout
    assert tail.decode().split() == [str(i) for i in range(1990, 2000)]
    first = kcat(cluster, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", "1", "-f", "%T\n")
    timestamp = int(first.stdout.decode())
    since = kcat(
        cluster, "-C", "-t", topic, "-p", "0", "-o", f"s@{timestamp}", "-c", "1", "-f", "%o\n"
    )
    assert since.stdout.decode().strip() == "0"


def test_records_cross_between_kcat_and_highwater_byte_for_byte(cluster: Cluster) -> None:
    create_topic(cluster, "k-mixed", partitions=1)
    ours = [{"key": "alice", "value": "from highwater", "headers": [{"key": "src", "value": "hw"}]}]
    stdin = "".join(json.dumps(r) + "\n" for r in ours).encode()
    cli(cluster, "produce", "k-mixed", "--json", stdin=stdin)
    kcat(
        cluster, "-P", "-t", "k-mixed", "-p", "0", "-K:", "-H", "src=kcat", stdin=b"bob:from kcat\n"
    )
    theirs = (
        kcat(cluster, "-C", "-t", "k-mixed", "-o", "beginning", "-e", "-J")
        .stdout.decode()
        .splitlines()
    )
    via_kcat = [json.loads(line) for line in theirs]
    via_highwater = [
        json.loads(line)
        for line in cli(cluster, "consume", "k-mixed", "--from-beginning", "-e", "--json")
        .stdout.decode()
        .splitlines()
    ]
    assert [(r["offset"], r["key"], r["payload"]) for r in via_kcat] == [
        (0, "alice", "from highwater"),
        (1, "bob", "from kcat"),
    ]
    assert [r["headers"] for r in via_kcat] == [["src", "hw"], ["src", "kcat"]]
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in via_highwater] == [
        (0, "alice", "from highwater", [{"key": "src", "value": "hw"}]),
        (1, "bob", "from kcat", [{"key": "src", "value": "kcat"}]),
    ]
    assert [r["timestamp"] for r in via_highwater] == [r["ts"] for r in via_kcat]


def test_confluent_kafka_idempotent_producer_and_assigned_consumer(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(cluster, "ck-idem", partitions=3)
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    acked: dict[int, list[int]] = {0: [], 1: [], 2: []}
    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.partition()].append(msg.offset())  # type: ignore[attr-defined]

    for i in range(3000):
        producer.produce(
            "ck-idem",
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % 3,
            headers=[("n", str(i).encode())],
            on_delivery=delivered,
        )
    assert producer.flush(DEADLINE_S) == 0
    assert errors == []
    assert {p: sorted(o) for p, o in acked.items()} == {p: list(range(1000)) for p in range(3)}

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "ck-assign",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition("ck-idem", 1), timeout=10) == (0, 1000)
        consumer.assign([TopicPartition("ck-idem", p, 0) for p in range(3)])
        got: dict[int, list[tuple[int, bytes, bytes]]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, got.values())) < 3000 and time.monotonic() < deadline:
            for m in consumer.consume(500, 1.0):
                assert m.error() is None, m.error()
                got[m.partition()].append((m.offset(), m.key(), m.value()))
        for p in range(3):
            assert [o for o, _, _ in got[p]] == list(range(1000))
            assert [v for _, _, v in got[p]] == [b"v%d" % i for i in range(p, 3000, 3)]
        # seek back, and offsets_for_times / a memberless commit (OffsetCommit, OffsetFetch)
        consumer.seek(TopicPartition("ck-idem", 0, 500))
        (m,) = consumer.consume(1, 10)
        assert (m.partition(), m.offset(), m.value()) == (0, 500, b"v1500")
        (found,) = consumer.offsets_for_times([TopicPartition("ck-idem", 2, 0)], timeout=10)
        assert found.offset == 0
        consumer.commit(offsets=[TopicPartition("ck-idem", 1, 777)], asynchronous=False)
        (committed,) = consumer.committed([TopicPartition("ck-idem", 1)], timeout=10)
        assert committed.offset == 777
    finally:
        consumer.close()
    described = cli(cluster, "groups", "describe", "ck-assign").stdout.decode()
    assert "777" in described


def _frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)  # client_id null
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _answer(sock: socket.socket) -> bytes | None:
    decoder = FrameDecoder(1024 * 1024)
    while True:
        frame = decoder.next_frame()
        if frame is not NEED_DATA:
            assert isinstance(frame, bytes | bytearray)
            return bytes(frame)
        data = sock.recv(65536)
        if not data:
            return None
        decoder.receive_data(data)


def test_unsupported_versions_and_unknown_apis_get_kafkas_answers(cluster: Cluster) -> None:
    port = cluster.brokers[1].port_of("KAFKA")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_frame(18, 99, 7))  # ApiVersions v99
        answer = _answer(sock)
        assert answer is not None
        correlation_id, error_code = struct.unpack_from(">ih", answer)
        assert (correlation_id, error_code) == (7, 35)  # UNSUPPORTED_VERSION, then the ranges
        (count,) = struct.unpack_from(">i", answer, 6)
        ranges = {struct.unpack_from(">hhh", answer, 10 + 6 * i)[0] for i in range(count)}
        assert {0, 1, 2, 3, 18} <= ranges
        # the connection stays usable: a good ApiVersions v0 now
        sock.sendall(_frame(18, 0, 8))
        answer = _answer(sock)
        assert answer is not None and struct.unpack_from(">ih", answer) == (8, 0)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_frame(57, 0, 9))  # UpdateFeatures: not served, as on a Kafka listener
        assert _answer(sock) is None  # closed, as Kafka closes it
    wait_until(lambda: cluster.brokers[1].running or None, 5, "the broker still running")


def test_kafka_python_produces_consumes_and_joins_a_group(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # kafka-python

    create_topic(cluster, "kp-all", partitions=3)
    producer = KafkaProducer(
        bootstrap_servers=kafka_bootstrap(cluster), acks="all", compression_type="gzip"
    )
    sent = [
        producer.send("kp-all", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3)
        for i in range(300)
    ]
    producer.flush()
    assert sorted(f.get(timeout=DEADLINE_S).offset for f in sent) == sorted(
        o for o in range(100) for _ in range(3)
    )
    producer.close()
    reader = KafkaConsumer(bootstrap_servers=kafka_bootstrap(cluster), consumer_timeout_ms=5000)
    partitions = [TopicPartition("kp-all", p) for p in range(3)]
    reader.assign(partitions)
    assert reader.end_offsets(partitions) == dict.fromkeys(partitions, 100)
    reader.seek_to_beginning()
    assert {(m.partition, m.offset, m.value) for m in reader} == {
        (i % 3, i // 3, b"v%d" % i) for i in range(300)
    }
    reader.close()
    member = KafkaConsumer(
        "kp-all",
        bootstrap_servers=kafka_bootstrap(cluster),
        group_id="kp-group",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    assert sum(1 for _ in member) == 300
    member.commit()
    member.close()
    offsets = json.loads(cli(cluster, "groups", "describe", "kp-group", "--json").stdout)[0]
    assert {o["partition"]: o["current_offset"] for o in offsets["offsets"]} == dict.fromkeys(
        range(3), 100
    )


async def _aiokafka_round_trip(bootstrap: str) -> tuple[int, int]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, compression_type="zstd"
    )
    await producer.start()
    try:
        for i in range(300):
            await producer.send("ak-all", key=b"a%d" % i, value=b"x%d" % i, partition=i % 3)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "ak-all", bootstrap_servers=bootstrap, group_id="ak-group", auto_offset_reset="earliest"
    )
    await consumer.start()
    read = 0
    try:
        deadline = time.monotonic() + DEADLINE_S
        while read < 300 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000)
            read += sum(len(records) for records in batches.values())
        await consumer.commit()
        committed = await consumer.committed(TopicPartition("ak-all", 0))
    finally:
        await consumer.stop()
    return read, committed or -1


def test_aiokafka_idempotent_producer_and_group_consumer(cluster: Cluster) -> None:
    import asyncio

    create_topic(cluster, "ak-all", partitions=3)
    assert asyncio.run(_aiokafka_round_trip(kafka_bootstrap(cluster))) == (300, 100)


def test_an_idempotent_producer_survives_its_leader_killed(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(cluster, "ck-kill", partitions=1)
    described = json.loads(cli(cluster, "topics", "describe", "ck-kill", "--json").stdout)[0]
    leader = described["partitions"][0]["leader"]
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 120_000,
        }
    )
    acked: list[int] = []
    failed: list[str] = []

    def delivered(err: object, msg: Any) -> None:
        if err is None:
            acked.append(int(msg.value()))
        else:
            failed.append(str(err))

    def send(first: int, last: int) -> None:
        for i in range(first, last):
            producer.produce("ck-kill", str(i).encode(), partition=0, on_delivery=delivered)
            if i % 200 == 0:
                producer.poll(0)  # delivery callbacks run in poll()

    def some_acknowledged() -> bool | None:
        producer.poll(0.1)
        return len(acked) > 2000 or None

    send(0, 5000)
    wait_until(some_acknowledged, DEADLINE_S, "records acknowledged")
    cluster.brokers[leader].kill()  # with records still in flight, and 15,000 to come
    send(5000, 20_000)
    assert producer.flush(150) == 0
    cluster.brokers[leader].start()
    assert failed == []
    assert acked == sorted(acked)  # acknowledged in order
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(cluster), "group.id": "ck-kill"})
    try:
        consumer.assign([TopicPartition("ck-kill", 0, 0)])
        read: list[int] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(read) < len(acked) and time.monotonic() < deadline:
            read += [int(m.value()) for m in consumer.consume(1000, 1.0) if m.error() is None]
    finally:
        consumer.close()
    assert read == list(range(20_000))  # every record once, in order: no loss, no duplicate


def test_admin_client_topics_partitions_configs_and_cluster(cluster: Cluster) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    (created,) = admin.create_topics(
        [NewTopic("ck-admin", 2, 3, config={"retention.ms": "60000"})]
    ).values()
    created.result(DEADLINE_S)
    (grown,) = admin.create_partitions([NewPartitions("ck-admin", 4)]).values()
    grown.result(DEADLINE_S)
    assert len(admin.list_topics("ck-admin", timeout=10).topics["ck-admin"].partitions) == 4
    resource = ConfigResource("topic", "ck-admin")
    (described,) = admin.describe_configs([resource]).values()
    assert described.result(DEADLINE_S)["retention.ms"].value == "60000"
    change = ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET)
    (altered,) = admin.incremental_alter_configs(
        [ConfigResource("topic", "ck-admin", incremental_configs=[change])]
    ).values()
    altered.result(DEADLINE_S)
    ours = cli(cluster, "configs", "describe", "--topic", "ck-admin").stdout.decode()
    assert "120000" in ours
    described_cluster = admin.describe_cluster().result(DEADLINE_S)  # DescribeCluster
    assert sorted(n.id for n in described_cluster.nodes) == [1, 2, 3]
    assert {n.port for n in described_cluster.nodes} == {
        b.port_of("KAFKA") for b in cluster.brokers.values()
    }
    (deleted,) = admin.delete_topics(["ck-admin"]).values()
    deleted.result(DEADLINE_S)
    wait_until(
        lambda: "ck-admin" not in admin.list_topics(timeout=10).topics or None,
        DEADLINE_S,
        "the topic gone",
    )


def test_confluent_kafka_producer_is_throttled_by_its_client_id_quota(cluster: Cluster) -> None:
    """A client-id quota applies on the Kafka listener too: librdkafka sees throttle_time_ms
    in its Produce responses (its throttle_cb), and another client-id does not."""
    from confluent_kafka import Producer

    create_topic(cluster, "ck-quota", partitions=1)
    quota = ("--entity-type", "clients", "--entity-name", "ck-throttled")
    cli(cluster, "configs", "alter", *quota, "--add-config", "producer_byte_rate=65536")
    seen: dict[str, list[float]] = {"ck-throttled": [], "ck-free": []}

    def producer(client_id: str) -> Any:
        def throttled(event: Any) -> None:
            seen[client_id].append(event.throttle_time)

        return Producer(
            {
                "bootstrap.servers": kafka_bootstrap(cluster),
                "client.id": client_id,
                "linger.ms": 5,
                "throttle_cb": throttled,
            }
        )

    producers = {client_id: producer(client_id) for client_id in seen}
    payload = b"q" * 10_000
    try:
        deadline = time.monotonic() + DEADLINE_S
        sent = 0
        # Kafka's windows let about 10 s of quota (640 KiB) through before the first throttle.
        while not seen["ck-throttled"] and time.monotonic() < deadline:
            for p in producers.values():
                with contextlib.suppress(BufferError):  # a full queue: poll lets it drain
                    p.produce("ck-quota", payload)
                p.poll(0.01)
            sent += len(payload)
        assert seen["ck-throttled"], f"no throttle after {sent} bytes each"
        assert max(seen["ck-throttled"]) > 0
        for p in producers.values():
            assert p.flush(DEADLINE_S) == 0
        assert seen["ck-free"] == []
    finally:
        cli(cluster, "configs", "alter", *quota, "--delete-config", "producer_byte_rate")
