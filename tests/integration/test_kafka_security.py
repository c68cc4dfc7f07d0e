"""SASL and TLS on a Kafka listener, driven by kcat and confluent-kafka (librdkafka): PLAIN
(kcat) and SCRAM-SHA-256/512 (kcat and confluent-kafka) over SASL_SSL, a wrong password
refused at authentication, ACLs applied to a Kafka client as to Highwater's own, and
librdkafka's re-authentication (KIP-368) under `connections.max.reauth.ms` (docs/kafka.md)."""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from scramp import ScramClient

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.security_admin import upsert_user
from tests.integration.cluster_harness import Cluster
from tests.integration.kafka_wire_cluster import DEADLINE_S, KCAT
from tests.integration.replication_checks import logged_events
from tests.integration.secure_cluster import (
    Pki,
    make_pki,
    secure_cluster,
    wait_for_secured_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REAUTH_MS = 3000  # every test here runs with sessions this short


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    if KCAT is None:
        pytest.fail("kcat is not installed (make kcat)")
    cluster = secure_cluster(
        zookeeper.port,
        tmp_path_factory.mktemp("kafka-sasl"),
        1,
        pki,
        kafka_listener=True,
        settings={"connections.max.reauth.ms": str(REAUTH_MS)},
    )
    cluster.start()
    try:
        trio.run(_set_up, cluster, pki)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


async def _set_up(cluster: Cluster, pki: Pki) -> None:
    as_broker = await wait_for_secured_broker(cluster, pki)
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=as_broker) as admin:
        for user in ("admin", "nobody"):
            await upsert_user(admin, user, f"{user}-secret")
        await admin.create_topic("sasl-topic", partitions=1, replication_factor=1)


def kcat(cluster: Cluster, pki: Pki, user: str, password: str, mechanism: str, *args: str,
         stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    assert KCAT is not None
    return subprocess.run(
        [
            KCAT, "-b", cluster.bootstrap_on("KAFKA"),
            "-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanisms={mechanism}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
            "-X", f"ssl.ca.location={pki.ca}", *args,
        ],
        input=stdin,
        capture_output=True,
        timeout=DEADLINE_S,
    )  # fmt: skip


def test_kcat_logs_in_with_plain_over_tls_and_produces_and_consumes(
    cluster: Cluster, pki: Pki
) -> None:
    lines = b"one PLAIN\ntwo PLAIN\n"
    produced = kcat(cluster, pki, "admin", "admin-secret", "PLAIN", "-P", "-t", "sasl-topic",
                    stdin=lines)  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kcat(cluster, pki, "admin", "admin-secret", "PLAIN", "-C", "-t", "sasl-topic",
                    "-o", "-2", "-e")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().splitlines() == ["one PLAIN", "two PLAIN"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_logs_in_with_scram_and_produces_and_consumes(
    cluster: Cluster, pki: Pki, mechanism: str
) -> None:
    """Debian's kcat 1.7.1 (librdkafka 2.0.2) sends its client nonce again in front of the
    server-first nonce in its client-final message; taken as Kafka 3.9 takes it."""
    line = f"kcat {mechanism}\n".encode()
    produced = kcat(cluster, pki, "admin", "admin-secret", mechanism, "-P", "-t", "sasl-topic",
                    stdin=line)  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kcat(cluster, pki, "admin", "admin-secret", mechanism, "-C", "-t", "sasl-topic",
                    "-o", "-1", "-e")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout == line
    refused = kcat(cluster, pki, "admin", "not-the-password", mechanism, "-L")
    assert refused.returncode != 0


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_logs_in_with_scram_and_produces_and_consumes(
    cluster: Cluster, pki: Pki, mechanism: str
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    login = {
        "bootstrap.servers": cluster.bootstrap_on("KAFKA"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mechanism,
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
        "ssl.ca.location": str(pki.ca),
    }
    producer = Producer({**login, "acks": "all"})
    producer.produce("sasl-topic", value=mechanism.encode())
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**login, "group.id": f"g-{mechanism}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition("sasl-topic", 0), timeout=10)
        consumer.assign([TopicPartition("sasl-topic", 0, high - 1)])
        values = []
        for _ in range(20):
            values += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
            if values:
                break
        assert values == [mechanism.encode()]
    finally:
        consumer.close()


def test_a_wrong_password_fails_authentication(cluster: Cluster, pki: Pki) -> None:
    result = kcat(cluster, pki, "admin", "not-the-password", "PLAIN", "-L")
    assert result.returncode != 0
    assert b"Authentication failed" in result.stderr or b"SASL" in result.stderr


def test_acls_apply_to_a_kafka_client(cluster: Cluster, pki: Pki) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_on("KAFKA"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "nobody",
            "sasl.password": "nobody-secret",
            "ssl.ca.location": str(pki.ca),
            "group.id": "nobody-group",
        }
    )
    try:
        consumer.assign([TopicPartition("sasl-topic", 0, 0)])
        errors = []
        for _ in range(20):
            for message in consumer.consume(10, 0.5):
                if message.error() is not None:
                    errors.append(message.error().code())
            if errors:
                break
        # its committed offsets (GROUP_...) or the records (TOPIC_...): refused either way
        refused = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}
        assert refused & set(errors), errors
    finally:
        consumer.close()


def test_confluent_kafka_reauthenticates_and_produces_past_several_sessions(
    cluster: Cluster, pki: Pki
) -> None:
    """librdkafka (1.9+) re-authenticates before session_lifetime_ms passes (KIP-368): ten
    seconds of records, each acknowledged, with no error and no new connection."""
    from confluent_kafka import KafkaError, Producer

    broker = cluster.brokers[1]
    mark = len(broker.log_text())
    errors: list[KafkaError] = []
    delivered: list[Any] = []

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        delivered.append(error or message.offset())

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_on("KAFKA"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
            "ssl.ca.location": str(pki.ca),
            "acks": "all",
            "error_cb": errors.append,
        }
    )
    producer.produce("sasl-topic", value=b"first", on_delivery=on_delivery)
    assert producer.flush(DEADLINE_S) == 0
    connected = _kafka_events(broker, "authenticated", mark)
    sent = 1
    end = time.monotonic() + 10
    while time.monotonic() < end:
        producer.produce("sasl-topic", value=b"tick", on_delivery=on_delivery)
        sent += 1
        assert producer.flush(DEADLINE_S) == 0  # acknowledged before the next one
    assert errors == []
    assert len(delivered) == sent and all(isinstance(offset, int) for offset in delivered)
    assert delivered == list(range(delivered[0], delivered[0] + sent))
    assert _kafka_events(broker, "authenticated", mark) == connected  # no new connection
    assert len(_kafka_events(broker, "re-authenticated", mark)) >= 3
    assert _kafka_events(broker, "closing connection: authentication session expired", mark) == []


def _kafka_events(broker: Any, event: str, since: int) -> list[dict[str, Any]]:
    return logged_events(broker, event, since=since, principal="User:admin", listener="KAFKA")


def _kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _send_frame(sock: ssl.SSLSocket, body: bytes) -> None:
    sock.sendall(struct.pack(">i", len(body)) + body)


def _read_frame(sock: ssl.SSLSocket) -> bytes | None:
    """One frame, or None if the broker closed the connection."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[4:]


def _raw_scram_login(cluster: Cluster, pki: Pki, password: str) -> tuple[ssl.SSLSocket, bool]:
    """SaslHandshake v0 (SCRAM-SHA-256), then the SCRAM exchange as raw tokens, as a client
    without SaslAuthenticate speaks it; whether the broker completed it."""
    host, port = cluster.bootstrap_on("KAFKA").split(",")[0].rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(pki.ca))
    sock = context.wrap_socket(
        socket.create_connection((host, int(port)), DEADLINE_S), server_hostname=host
    )
    header = struct.pack(">hhi", 17, 0, 1) + _kafka_string("raw-sasl")
    _send_frame(sock, header + _kafka_string("SCRAM-SHA-256"))
    answer = _read_frame(sock)
    assert answer is not None
    (correlation_id, error_code) = struct.unpack_from(">ih", answer)
    assert (correlation_id, error_code) == (1, 0)
    client = ScramClient(["SCRAM-SHA-256"], "admin", password)
    _send_frame(sock, client.get_client_first().encode())  # no request header
    server_first = _read_frame(sock)
    assert server_first is not None and server_first.startswith(b"r=")
    client.set_server_first(server_first.decode())
    _send_frame(sock, client.get_client_final().encode())
    server_final = _read_frame(sock)
    if server_final is None:
        return sock, False
    client.set_server_final(server_final.decode())  # raises unless the server proved itself
    return sock, True


def test_raw_sasl_tokens_after_a_v0_handshake_log_in(cluster: Cluster, pki: Pki) -> None:
    """Kafka's SaslServerAuthenticator reads the frames after a SaslHandshake v0 as raw SASL
    tokens; no client at hand sends them to a broker that offers SaslAuthenticate, so this
    socket client does, then sends an ordinary request on the authenticated connection."""
    sock, completed = _raw_scram_login(cluster, pki, "admin-secret")
    with sock:
        assert completed
        metadata_v0 = struct.pack(">hhi", 3, 0, 7) + _kafka_string("raw-sasl")
        _send_frame(sock, metadata_v0 + struct.pack(">i", 0))
        answer = _read_frame(sock)
        assert answer is not None and struct.unpack_from(">i", answer)[0] == 7
        (brokers,) = struct.unpack_from(">i", answer, 4)
        assert brokers == 1
    refused, completed = _raw_scram_login(cluster, pki, "not-the-password")
    with refused:
        assert not completed  # closed without an answer, as Kafka does
