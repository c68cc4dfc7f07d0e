"""Topic ids (KIP-516) end to end on a 3-broker cluster with Kafka listeners (docs/kafka.md):
the znode's id, the elected controller's backfill of a znode written before ids, the same
ids on every broker and across restarts, and Kafka clients that use them (librdkafka's
Fetch v13+ and describe_topics, `group.protocol=consumer`), and DeleteTopics v6 by id."""

from __future__ import annotations

import datetime
import io
import json
import logging
import re
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from kazoo.client import KazooClient
from kio.schema.delete_topics.v6.request import DeleteTopicState
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from client.cli.zookeeper_server import ZooKeeperServer
from controller import zk_data
from protocol.errors import ErrorCode
from protocol.kafka.frames import request_class, response_class
from protocol.topic_id import parse_topic_id
from tests.integration.cluster_harness import Cluster, fetch_metadata, wait_until
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

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# A topic znode as written before topic ids (Kafka's TopicZNode version 1).
OLD_SHAPE = b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}'


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with kafka_cluster(zookeeper.port, tmp_path_factory.mktemp("kafka-topic-ids")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


@pytest.fixture
def zk(cluster: Cluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=5.0)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def znode(zk: KazooClient, topic: str) -> dict[str, object]:
    data, _ = zk.get(zk_data.topic_path(topic))
    loaded: dict[str, object] = json.loads(data)
    return loaded


def ids_on_each_broker(cluster: Cluster, topics: list[str]) -> dict[int, dict[str, str]] | None:
    """Each broker's own Metadata answer (native v2): topic -> id; None while one is down."""
    out = {}
    for broker_id, broker in cluster.brokers.items():
        response = trio.run(fetch_metadata, broker.port)
        if response is None:
            return None
        out[broker_id] = {t.name: t.topic_id for t in response.topics if t.name in topics}
    return out


def wait_for_ids_everywhere(cluster: Cluster, expected: dict[str, str]) -> None:
    wanted = {broker_id: expected for broker_id in cluster.brokers}
    wait_until(
        lambda: ids_on_each_broker(cluster, list(expected)) == wanted or None,
        DEADLINE_S,
        f"every broker's metadata to hold {expected}",
    )


def restart_every_broker(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        broker.stop()
    cluster.start()


def test_ids_are_backfilled_by_the_elected_controller_and_the_same_everywhere_for_good(
    cluster: Cluster, zk: KazooClient
) -> None:
    create_topic(cluster, "ids-new", partitions=2)
    created = znode(zk, "ids-new")
    assert created["version"] == 3
    new_id = created["topic_id"]
    assert isinstance(new_id, str) and len(new_id) == 22
    # Every broker down, a topic as a cluster from before topic ids wrote it, then an election.
    for broker in cluster.brokers.values():
        broker.stop()
    zk.create(zk_data.topic_config_path("ids-old"), b'{"version":1,"config":{}}', makepath=True)
    zk.create(zk_data.topic_path("ids-old"), OLD_SHAPE, makepath=True)
    assert "topic_id" not in znode(zk, "ids-old")
    cluster.start()
    old_id = wait_until(
        lambda: znode(zk, "ids-old").get("topic_id"), DEADLINE_S, "the controller's backfill"
    )
    assert isinstance(old_id, str) and old_id != new_id
    backfilled = znode(zk, "ids-old")
    assert backfilled["version"] == 3
    assert backfilled["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    expected = {"ids-new": new_id, "ids-old": old_id}
    wait_for_ids_everywhere(cluster, expected)
    described = cli(cluster, "topics", "describe", "ids-old").stdout.decode()
    assert f"Topic: ids-old\tTopicId: {old_id}\tPartitionCount: 2" in described

    restart_every_broker(cluster)  # a new controller, new caches: the same ids
    wait_for_ids_everywhere(cluster, expected)
    assert znode(zk, "ids-new")["topic_id"] == new_id
    assert znode(zk, "ids-old")["topic_id"] == old_id


def test_confluent_kafka_fetches_by_topic_id_and_describes_ids(
    cluster: Cluster, zk: KazooClient
) -> None:
    from confluent_kafka import Consumer, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(cluster, "ids-ck", partitions=2)
    topic_id = znode(zk, "ids-ck")["topic_id"]
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(500))
    kcat(cluster, "-P", "-t", "ids-ck", "-K:", stdin=lines)

    sent = []

    class Requests(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.extend(re.findall(r"Sent FetchRequest \(v(\d+)", record.getMessage()))

    logger = logging.getLogger("ids-ck-consumer")
    logger.addHandler(Requests())
    logger.setLevel(logging.DEBUG)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "ids-ck",
            "auto.offset.reset": "earliest",
            "debug": "protocol",
            "logger": logger,
        }
    )
    try:
        consumer.assign([TopicPartition("ids-ck", p, 0) for p in range(2)])
        got: list[bytes] = []

        def consumed() -> bool | None:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                got.append(message.value())
            consumer.poll(0)  # serves the logger's queue
            return len(got) >= 500 or None

        wait_until(consumed, DEADLINE_S, "the consumer to read all 500 records")
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(500))
    versions = {int(v) for v in sent}
    assert versions and min(versions) >= 13, f"Fetch versions sent: {sorted(versions)}"

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    futures = admin.describe_topics(TopicCollection(["ids-ck"]))
    description = futures["ids-ck"].result(timeout=DEADLINE_S)
    # librdkafka prints a Uuid in standard base64, Kafka's Uuid.toString in base64url: the
    # same 16 bytes either way.
    assert str(description.topic_id).translate(str.maketrans("+/", "-_")) == topic_id


def test_confluent_kafka_consumers_share_a_group_over_the_kip_848_protocol(
    cluster: Cluster,
) -> None:
    """`group.protocol=consumer`: ConsumerGroupHeartbeat on the Kafka wire, whose owned
    partitions and assignments name topics by id, hosted in the same KIP-848 coordinator as
    Highwater's own members."""
    from confluent_kafka import Consumer

    create_topic(cluster, "ids-848", partitions=4)
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(400))
    kcat(cluster, "-P", "-t", "ids-848", "-K:", stdin=lines)
    settings = {
        "bootstrap.servers": kafka_bootstrap(cluster),
        "group.id": "ids-848",
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
    }
    first, second = Consumer(settings), Consumer(settings)
    got: set[bytes] = set()

    def poll(*consumers: Consumer) -> None:
        for consumer in consumers:
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                got.add(message.value())

    def owned(consumer: Consumer) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    try:
        first.subscribe(["ids-848"])

        def first_owns_all() -> bool | None:
            poll(first)
            return owned(first) == {0, 1, 2, 3} or None

        wait_until(first_owns_all, DEADLINE_S, "the only member to be given every partition")
        second.subscribe(["ids-848"])

        def shared() -> bool | None:
            poll(first, second)
            mine, theirs = owned(first), owned(second)
            return (len(mine) == len(theirs) == 2 and mine | theirs == {0, 1, 2, 3}) or None

        wait_until(shared, DEADLINE_S, "the two members to split the four partitions")

        def all_read() -> bool | None:
            poll(first, second)
            return len(got) == 400 or None

        wait_until(all_read, DEADLINE_S, "every record to be read by the group")
        described = cli(cluster, "groups", "describe", "ids-848").stdout.decode()
        rows = [line.split() for line in described.splitlines()[1:] if line.strip()]
        # GROUP TOPIC PARTITION CURRENT-OFFSET HIGH-WATERMARK LAG MEMBER-ID HOST CLIENT-ID
        assert sorted(int(r[2]) for r in rows) == [0, 1, 2, 3], described
        assert len({r[6] for r in rows}) == 2 and {r[8] for r in rows} == {"rdkafka"}, described
    finally:
        first.close()
        second.close()
    assert got == {b"v%d" % i for i in range(400)}


def kafka_call(
    cluster: Cluster, api_key: int, version: int, body: object, broker_id: int = 1
) -> Any:
    """One request on a broker's Kafka listener, written and read with kio's classes."""
    header = RequestHeaderV2(
        request_api_key=i16(api_key),
        request_api_version=i16(version),
        correlation_id=i32(9),
        client_id="topic-ids-test",
    )
    out = io.BytesIO()
    entity_writer(RequestHeaderV2)(out, header)
    entity_writer(type(body))(out, body)
    payload = out.getvalue()
    broker = cluster.brokers[broker_id]
    with socket.create_connection((broker.host, broker.port_of("KAFKA")), DEADLINE_S) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        answer = stream.read(size)
    assert struct.unpack_from(">i", answer)[0] == 9 and answer[4] == 0  # header v1, no tags
    body_out, _ = entity_reader(response_class(api_key, version))(answer, 5)
    return body_out


def describe_at_coordinator(cluster: Cluster, version: int, group: str) -> Any:
    """A group's ConsumerGroupDescribe entry as its coordinator answers it (the other
    brokers: NOT_COORDINATOR)."""
    request = request_class(69, version)(group_ids=(group,), include_authorized_operations=False)
    for broker_id in sorted(cluster.brokers):
        (answer,) = kafka_call(cluster, 69, version, request, broker_id).groups
        if answer.error_code != ErrorCode.NOT_COORDINATOR:
            return answer
    raise AssertionError(f"no broker coordinates {group}")


def test_confluent_kafka_describes_a_consumer_protocol_group_with_consumer_group_describe(
    cluster: Cluster, zk: KazooClient
) -> None:
    """AdminClient.describe_consumer_groups sends ConsumerGroupDescribe (69) for a group of
    `group.protocol=consumer` members; the raw answer has Kafka's epochs, member types and
    topic ids; a group of classic members only and an unknown group are GROUP_ID_NOT_FOUND
    as Kafka 4.0 answers them."""
    from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    create_topic(cluster, "ids-describe", partitions=4)
    topic_id = znode(zk, "ids-describe")["topic_id"]
    assert isinstance(topic_id, str)
    settings = {
        "bootstrap.servers": kafka_bootstrap(cluster),
        "group.id": "ids-describe",
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
    }
    members = [Consumer(settings), Consumer(settings)]
    classic = Consumer(
        {**settings, "group.id": "ids-describe-classic", "group.protocol": "classic"}
    )
    sent: list[tuple[str, str]] = []

    class Requests(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.extend(re.findall(r"Sent (\w+)Request \(v(\d+)", record.getMessage()))

    logger = logging.getLogger("ids-describe-admin")
    logger.addHandler(Requests())
    logger.setLevel(logging.DEBUG)
    admin = AdminClient(
        {"bootstrap.servers": kafka_bootstrap(cluster), "debug": "protocol", "logger": logger}
    )

    def owned(consumer: Consumer) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    try:
        for consumer in (*members, classic):
            consumer.subscribe(["ids-describe"])

        def shared() -> bool | None:
            for consumer in (*members, classic):
                consumer.poll(0.2)
            first, second = map(owned, members)
            return (len(first) == len(second) == 2 and len(owned(classic)) == 4) or None

        wait_until(
            shared, DEADLINE_S, "two consumer members with 2 partitions, a classic one with 4"
        )

        def described() -> Any:
            for consumer in (*members, classic):
                consumer.poll(0.1)
            (future,) = admin.describe_consumer_groups(["ids-describe"]).values()
            group = future.result(timeout=DEADLINE_S)
            admin.poll(0)  # serves the logger's queue
            return group if group.state == ConsumerGroupState.STABLE else None

        group = wait_until(described, DEADLINE_S, "the group described as Stable")
        assert group.type == ConsumerGroupType.CONSUMER
        assert group.partition_assignor == "uniform"
        by_member = {
            m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in group.members
        }
        assert by_member == {c.memberid(): owned(c) for c in members}
        for m in group.members:
            assert {tp.topic for tp in m.assignment.topic_partitions} == {"ids-describe"}
            assert m.target_assignment is not None
            target = {tp.partition for tp in m.target_assignment.topic_partitions}
            assert target == by_member[m.member_id]
            assert m.client_id == "rdkafka"
        admin.poll(0)
        # librdkafka 2.16 sends v0 (it reads no member_type); the raw v1 call below has it.
        assert ("ConsumerGroupDescribe", "0") in sent, sorted(set(sent))
        assert not any(name == "DescribeGroups" for name, _ in sent), sorted(set(sent))

        ours, theirs, unknown = (
            describe_at_coordinator(cluster, 1, g)
            for g in ("ids-describe", "ids-describe-classic", "nope")
        )
        assert (ours.error_code, ours.group_state) == (ErrorCode.NONE, "Stable")
        assert ours.group_epoch == ours.assignment_epoch > 0
        assert {m.member_id for m in ours.members} == set(by_member)
        for m in ours.members:
            assert (m.member_epoch, m.member_type) == (ours.assignment_epoch, 1)
            (tps,) = m.assignment.topic_partitions
            assert (tps.topic_id, tps.topic_name) == (parse_topic_id(topic_id), "ids-describe")
            assert set(tps.partitions) == by_member[m.member_id]
        assert (theirs.error_code, theirs.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Group ids-describe-classic is not a consumer group.",
        )
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Group nope not found.",
        )
    finally:
        for consumer in (*members, classic):
            consumer.close()


def test_delete_topics_v6_deletes_by_id_and_refuses_an_unknown_id(
    cluster: Cluster, zk: KazooClient
) -> None:
    create_topic(cluster, "ids-delete", partitions=1)
    topic_id = znode(zk, "ids-delete")["topic_id"]
    assert isinstance(topic_id, str)
    wait_for_ids_everywhere(cluster, {"ids-delete": topic_id})
    unknown = uuid.UUID(int=7)
    request = request_class(20, 6)(
        topics=(
            DeleteTopicState(name=None, topic_id=parse_topic_id(topic_id)),
            DeleteTopicState(name=None, topic_id=unknown),
        ),
        timeout=datetime.timedelta(seconds=30),
    )
    deleted, refused = kafka_call(cluster, 20, 6, request).responses
    assert (deleted.name, deleted.topic_id, deleted.error_code) == (
        "ids-delete",
        parse_topic_id(topic_id),
        ErrorCode.NONE,
    )
    assert (refused.name, refused.topic_id, refused.error_code) == (
        None,
        unknown,
        ErrorCode.UNKNOWN_TOPIC_ID,
    )
    assert zk.exists(zk_data.topic_path("ids-delete")) is None
