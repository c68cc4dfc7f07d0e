"""A secured 3-broker cluster (tests/integration/secure_cluster.py): SASL_SSL for clients,
SASL_PLAINTEXT between brokers, SCRAM users, ACLs. Every refusal is checked for its code and
for what it did not change."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer
from client.errors import HighwaterClientError
from client.network import AuthenticationFailedError, BrokerConnectionError, connect
from client.producer import Producer
from client.security import ClientSecurity
from client.security_admin import Acl, create_acls, upsert_user
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.records import Record, build_batch
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata
from tests.integration.group_checks import Member, commit, settle
from tests.integration.secure_cluster import (
    BROKER_PASSWORD,
    Pki,
    make_pki,
    secure_cluster,
    security,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    cluster = secure_cluster(zookeeper.port, tmp_path_factory.mktemp("secure"), 3, pki)
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
    """Whole (every broker sees every broker, over SASL_SSL); then the users, logged in as
    the brokers' own super user: admin, alice (producer), bob (consumer), eve (nothing)."""
    as_broker = security(pki, "broker", BROKER_PASSWORD)

    async def whole() -> bool:
        for broker in cluster.brokers.values():
            meta = await fetch_metadata(
                broker.port_of("EXTERNAL"), timeout_ms=5000, security=as_broker
            )
            if meta is None or len(meta.brokers) != 3 or meta.controller_id < 0:
                return False
        return True

    await eventually(whole, 90, "a whole secured cluster")
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=as_broker) as admin:
        for user in ("admin", "alice", "bob", "eve"):
            await upsert_user(admin, user, f"{user}-secret")

    async def admin_logs_in() -> bool:
        return (
            await fetch_metadata(cluster.brokers[1].port_of("EXTERNAL"), security=security(pki))
            is not None
        )

    await eventually(admin_logs_in, 30, "the admin's credentials on every broker")


def external(cluster: Cluster) -> str:
    return cluster.bootstrap_on("EXTERNAL")


async def test_metadata_answers_with_the_addresses_of_the_listener_asked(
    cluster: Cluster, pki: Pki
) -> None:
    meta = await fetch_metadata(cluster.brokers[1].port_of("EXTERNAL"), security=security(pki))
    assert meta is not None
    assert {(b.node_id, b.port) for b in meta.brokers} == {
        (i, b.port_of("EXTERNAL")) for i, b in cluster.brokers.items()
    }
    internal = await fetch_metadata(
        cluster.brokers[1].port_of("INTERNAL"), security=security(pki, protocol="SASL_PLAINTEXT")
    )
    assert internal is not None
    assert {b.port for b in internal.brokers} == {b.port for b in cluster.brokers.values()}


async def _grant(cluster: Cluster, pki: Pki, acls: list[Acl]) -> None:
    async with Admin(external(cluster), security=security(pki)) as admin:
        await create_acls(admin, acls)


async def _topic(cluster: Cluster, pki: Pki, name: str, partitions: int = 1) -> None:
    async with Admin(external(cluster), security=security(pki)) as admin:
        await admin.create_topic(
            name, partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"}
        )


async def _end_offsets(cluster: Cluster, pki: Pki, topic: str) -> dict[int, int | None]:
    async with Admin(external(cluster), security=security(pki)) as admin:
        (described,) = await admin.describe_topics([topic])
        return {p.partition: p.log_end_offset for p in described.partitions}


def _allow(principal: str, operation: str, resource_type: str, name: str) -> Acl:
    return Acl(resource_type, name, "LITERAL", principal, "*", operation, "ALLOW")


async def _wait_allowed(cluster: Cluster, pki: Pki, user: str, topic: str) -> None:
    """Until every broker's ACLs let `user` describe `topic` (changes reach them in seconds)."""

    async def described() -> bool:
        for broker in cluster.brokers.values():
            meta = await _metadata(
                broker.port_of("EXTERNAL"), security(pki, user, f"{user}-secret"), [topic]
            )
            if meta.topics[0].error_code != ErrorCode.NONE:
                return False
        return True

    await eventually(described, 30, f"{user} allowed to describe {topic} on every broker")


async def _metadata(
    port: int, as_user: ClientSecurity, topics: list[str] | None
) -> MetadataResponse:
    conn = await connect("127.0.0.1", port, security=as_user)
    try:
        response: MetadataResponse = await conn.request(MetadataRequest(topics))
        return response
    finally:
        await conn.aclose()


async def test_produce_and_consume_over_sasl_ssl_with_exactly_the_acls_needed(
    cluster: Cluster, pki: Pki
) -> None:
    await _topic(cluster, pki, "orders", partitions=3)
    await _grant(
        cluster,
        pki,
        [
            _allow("User:alice", "WRITE", "TOPIC", "orders"),
            _allow("User:bob", "READ", "TOPIC", "orders"),
        ],
    )
    await _wait_allowed(cluster, pki, "alice", "orders")
    await _wait_allowed(cluster, pki, "bob", "orders")
    async with Producer(
        external(cluster), security=security(pki, "alice", "alice-secret"), acks="all"
    ) as producer:
        for i in range(300):
            await producer.send("orders", f"order-{i}".encode(), key=str(i).encode())
        await producer.flush()
    got = []
    async with Consumer(
        external(cluster),
        security=security(pki, "bob", "bob-secret", mechanism="SCRAM-SHA-256"),
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.subscribe(["orders"])
        with trio.fail_after(60):
            while len(got) < 300:
                got.extend(await consumer.poll(timeout_ms=1000))
    assert sorted(r.value for r in got) == sorted(f"order-{i}".encode() for i in range(300))


async def test_a_principal_without_write_is_refused_and_the_log_is_unchanged(
    cluster: Cluster, pki: Pki
) -> None:
    await _topic(cluster, pki, "ledger")
    await _grant(cluster, pki, [_allow("User:eve", "DESCRIBE", "TOPIC", "ledger")])
    await _wait_allowed(cluster, pki, "eve", "ledger")
    before = await _end_offsets(cluster, pki, "ledger")
    meta = await _metadata(cluster.brokers[1].port_of("EXTERNAL"), security(pki), ["ledger"])
    leader = meta.topics[0].partitions[0].leader_id
    batch = build_batch([Record(b"forged")])
    conn = await connect(
        "127.0.0.1",
        cluster.brokers[leader].port_of("EXTERNAL"),
        security=security(pki, "eve", "eve-secret"),
    )
    try:
        response = await conn.request(
            ProduceRequest(
                -1, 5000, (ProduceTopicData("ledger", (ProducePartitionData(0, batch),)),)
            )
        )
    finally:
        await conn.aclose()
    code = response.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert await _end_offsets(cluster, pki, "ledger") == before
    # The producer client reports it too (its InitProducerId already: eve may write nowhere).
    async with Producer(
        external(cluster), security=security(pki, "eve", "eve-secret"), acks=1, max_block_ms=5000
    ) as producer:
        with pytest.raises(HighwaterClientError, match="AUTHORIZATION_FAILED"):
            await (await producer.send("ledger", b"x")).wait()
    assert await _end_offsets(cluster, pki, "ledger") == before


async def test_metadata_hides_topics_the_principal_may_not_describe(
    cluster: Cluster, pki: Pki
) -> None:
    await _topic(cluster, pki, "secret-plans")
    port = cluster.brokers[1].port_of("EXTERNAL")
    everything = await _metadata(port, security(pki, "eve", "eve-secret"), None)
    assert "secret-plans" not in {t.name for t in everything.topics}
    named = await _metadata(port, security(pki, "eve", "eve-secret"), ["secret-plans"])
    assert named.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert named.topics[0].partitions == ()
    admin_view = await _metadata(port, security(pki), None)
    assert "secret-plans" in {t.name for t in admin_view.topics}


@pytest.mark.parametrize(
    ("user", "password", "mechanism"),
    [
        ("alice", "wrong-password", "SCRAM-SHA-512"),
        ("alice", "wrong-password", "SCRAM-SHA-256"),
        ("alice", "wrong-password", "PLAIN"),
        ("nobody", "any-password", "SCRAM-SHA-512"),
        ("nobody", "any-password", "PLAIN"),
    ],
)
async def test_a_wrong_password_or_an_unknown_user_is_refused(
    cluster: Cluster, pki: Pki, user: str, password: str, mechanism: str
) -> None:
    with pytest.raises(AuthenticationFailedError, match="SASL_AUTHENTICATION_FAILED") as raised:
        await connect(
            "127.0.0.1",
            cluster.brokers[1].port_of("EXTERNAL"),
            security=security(pki, user, password, mechanism=mechanism),
        )
    assert raised.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


async def test_plain_is_not_offered_without_tls(cluster: Cluster, pki: Pki) -> None:
    """PLAIN over SASL_PLAINTEXT would send the password in clear: the client refuses to,
    and the broker does not offer it there."""
    with pytest.raises(ValueError, match="PLAIN"):
        security(pki, "alice", "alice-secret", mechanism="PLAIN", protocol="SASL_PLAINTEXT")
    conn = await connect("127.0.0.1", cluster.brokers[1].port_of("INTERNAL"))
    try:
        response = await conn.request(SaslHandshakeRequest("PLAIN"))
    finally:
        await conn.aclose()
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "PLAIN" not in response.mechanisms


async def test_an_unknown_certificate_and_plaintext_to_a_tls_port_are_refused(
    cluster: Cluster, pki: Pki
) -> None:
    port = cluster.brokers[1].port_of("EXTERNAL")
    untrusting = ClientSecurity(
        protocol="SASL_SSL", username="admin", password="admin-secret", ssl_cafile=str(pki.other_ca)
    )
    with pytest.raises(AuthenticationFailedError, match="TLS handshake failed"):
        await connect("127.0.0.1", port, security=untrusting)
    plain = await connect("127.0.0.1", port)  # TCP is accepted; nothing else is
    with pytest.raises(BrokerConnectionError, match="a TLS or SASL listener"):
        await plain.request(MetadataRequest(None), timeout_ms=5000)


async def test_requests_before_authentication_close_the_connection(cluster: Cluster) -> None:
    conn = await connect("127.0.0.1", cluster.brokers[1].port_of("INTERNAL"))
    with pytest.raises(BrokerConnectionError, match="a TLS or SASL listener"):
        await conn.request(MetadataRequest(None), timeout_ms=5000)


async def test_a_client_pretending_to_be_a_follower_or_the_controller_is_refused(
    cluster: Cluster, pki: Pki
) -> None:
    """A replica fetch (CVE-2018-1288), LeaderAndIsr, StopReplica, UpdateMetadata and
    ControlledShutdown need CLUSTER_ACTION: alice, with READ and WRITE on the topic, is refused
    each, and the partition keeps its leader, epoch and records."""
    await _topic(cluster, pki, "replicated")
    await _grant(
        cluster,
        pki,
        [
            _allow("User:alice", "WRITE", "TOPIC", "replicated"),
            _allow("User:alice", "READ", "TOPIC", "replicated"),
        ],
    )
    await _wait_allowed(cluster, pki, "alice", "replicated")
    meta = await _metadata(cluster.brokers[1].port_of("EXTERNAL"), security(pki), ["replicated"])
    partition = meta.topics[0].partitions[0]
    follower = next(r for r in partition.replica_nodes if r != partition.leader_id)
    alice = security(pki, "alice", "alice-secret")
    async with Producer(external(cluster), security=alice, acks="all") as producer:
        for i in range(5):
            await producer.send("replicated", b"%d" % i)
        await producer.flush()
    before = await _end_offsets(cluster, pki, "replicated")
    assert before == {0: 5}
    conn = await connect(
        "127.0.0.1", cluster.brokers[partition.leader_id].port_of("EXTERNAL"), security=alice
    )
    try:
        fetch = await conn.request(
            FetchRequest(
                follower,
                0,
                1,
                1 << 20,
                (FetchTopic("replicated", (FetchPartition(0, 0, 1 << 20),)),),
            )
        )
        assert fetch.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        takeover = LeaderAndIsrPartitionState(
            "replicated",
            0,
            999,
            follower,
            partition.leader_epoch + 1,
            (follower,),
            999,
            partition.replica_nodes,
        )
        answer = await conn.request(LeaderAndIsrRequest(follower, 999, -1, (takeover,), ()))
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        delete = StopReplicaTopicState("replicated", (StopReplicaPartitionState(0, -2, True),))
        stopped = await conn.request(StopReplicaRequest(follower, 999, -1, (delete,)))
        assert stopped.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        emptied = await conn.request(UpdateMetadataRequest(follower, 999, -1, (), ()))
        assert emptied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        await conn.aclose()
    to_controller = await connect(
        "127.0.0.1", cluster.brokers[meta.controller_id].port_of("EXTERNAL"), security=alice
    )
    try:
        shutdown = await to_controller.request(ControlledShutdownRequest(partition.leader_id, -1))
        assert shutdown.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        await to_controller.aclose()
    after = await _metadata(cluster.brokers[1].port_of("EXTERNAL"), security(pki), ["replicated"])
    assert after.topics[0].partitions[0].leader_id == partition.leader_id
    assert after.topics[0].partitions[0].leader_epoch == partition.leader_epoch
    assert len(after.brokers) == 3
    assert await _end_offsets(cluster, pki, "replicated") == before


def _rss_kib(cluster: Cluster, broker_id: int) -> int:
    process = cluster.brokers[broker_id].process
    assert process is not None
    with open(f"/proc/{process.pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _closed_by_broker(stream: trio.SocketStream, within_s: float) -> bool:
    """Whether the broker closes the stream (reading gets EOF or a reset) within the time."""
    with trio.move_on_after(within_s):
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, OSError):
            pass
        return True
    return False


async def test_pre_authentication_fuzzing_allocates_nothing_and_authenticated_clients_go_on(
    cluster: Cluster, pki: Pki
) -> None:
    """Random frames, huge declared sizes and a slow drip against a SASL listener (Kafka's
    CVE-2022-34917): each connection is closed, memory stays flat, and an authenticated
    producer and consumer keep working meanwhile."""
    import random
    import struct

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"fuzz seed {seed}")
    await _topic(cluster, pki, "during-fuzz")
    broker = cluster.brokers[1]
    port = broker.port_of("INTERNAL")  # SASL_PLAINTEXT: the frames reach the SASL layer as sent
    rss_before = _rss_kib(cluster, 1)
    # Huge declared sizes: closed at the 4-byte prefix, nothing read or allocated after it.
    for declared in (4097, 1 << 20, 100 * 1024 * 1024, 0x7FFFFFFF):
        for _ in range(50):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(struct.pack(">i", declared) + b"\x92" * 16)
            assert await _closed_by_broker(stream, 10), f"declared {declared} not refused"
            await stream.aclose()
    # Random frames within the limit: garbage bodies, random API keys, all refused.
    for _ in range(200):
        body = rng.randbytes(rng.randrange(0, 4096))
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(struct.pack(">i", len(body)) + body)
        assert await _closed_by_broker(stream, 10)
        await stream.aclose()
    # A slow drip of a frame just under the limit: closed at the authentication deadline.
    drip = await trio.open_tcp_stream("127.0.0.1", port)
    await drip.send_all(struct.pack(">i", 4000))

    async def dripping() -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            while True:
                await drip.send_all(b"\x00")
                await trio.sleep(0.2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(dripping)
        await _grant(cluster, pki, [_allow("User:alice", "WRITE", "TOPIC", "during-fuzz")])
        await _wait_allowed(cluster, pki, "alice", "during-fuzz")
        async with Producer(
            external(cluster), security=security(pki, "alice", "alice-secret"), acks="all"
        ) as producer:
            for i in range(100):
                await producer.send("during-fuzz", str(i).encode())
            await producer.flush()
        assert await _closed_by_broker(drip, 30), "a dripping connection outlived its deadline"
        nursery.cancel_scope.cancel()
    await drip.aclose()
    assert sum(v or 0 for v in (await _end_offsets(cluster, pki, "during-fuzz")).values()) == 100
    grown_kib = _rss_kib(cluster, 1) - rss_before
    assert grown_kib < 64 * 1024, f"the broker grew {grown_kib} KiB under pre-auth fuzzing"
    assert "Traceback" not in broker.log_text()


FAILED_AUTHENTICATION_DELAY_S = 0.1  # connection.failed.authentication.delay.ms's default


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
async def test_a_failed_login_is_answered_no_sooner_than_the_failure_delay(
    cluster: Cluster, pki: Pki, mechanism: str
) -> None:
    """A wrong password's answer (and the close) waits connection.failed.authentication.delay.ms
    (100 ms); a right one's does not."""
    port = cluster.brokers[1].port_of("EXTERNAL")
    refused, accepted = [], []
    for _ in range(3):
        started = trio.current_time()
        with pytest.raises(AuthenticationFailedError, match="SASL_AUTHENTICATION_FAILED"):
            await connect(
                "127.0.0.1", port, security=security(pki, "alice", "wrong", mechanism=mechanism)
            )
        refused.append(trio.current_time() - started)
        started = trio.current_time()
        conn = await connect(
            "127.0.0.1", port, security=security(pki, "alice", "alice-secret", mechanism=mechanism)
        )
        accepted.append(trio.current_time() - started)
        await conn.aclose()
    print(
        f"\n{mechanism}: wrong password answered in {min(refused) * 1000:.0f}-"
        f"{max(refused) * 1000:.0f} ms, right one in {min(accepted) * 1000:.0f}-"
        f"{max(accepted) * 1000:.0f} ms"
    )
    assert min(refused) >= FAILED_AUTHENTICATION_DELAY_S


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def test_a_flood_of_wrong_plain_passwords_does_not_stall_a_producer(
    cluster: Cluster, pki: Pki, tmp_path: Path
) -> None:
    """PLAIN hashes the password (PBKDF2, here 16384 iterations: tens of ms), which used to
    run on the broker's only event loop. Eight clients (another process) guess passwords of a
    user as fast as the broker answers, on the broker leading a partition that alice produces
    to: her Produce round trips stay close to what they are without the flood, and alice
    still logs in with PLAIN meanwhile."""
    await _topic(cluster, pki, "during-guessing")
    await _grant(cluster, pki, [_allow("User:alice", "WRITE", "TOPIC", "during-guessing")])
    await _wait_allowed(cluster, pki, "alice", "during-guessing")
    async with Admin(external(cluster), security=security(pki)) as admin:
        await upsert_user(admin, "target", "target-secret", iterations=16384)
    meta = await _metadata(
        cluster.brokers[1].port_of("EXTERNAL"), security(pki), ["during-guessing"]
    )
    leader = cluster.brokers[meta.topics[0].partitions[0].leader_id].port_of("EXTERNAL")
    batch = build_batch([Record(b"v" * 100)])
    produce = ProduceRequest(
        1, 5000, (ProduceTopicData("during-guessing", (ProducePartitionData(0, batch),)),)
    )
    alice = security(pki, "alice", "alice-secret")
    # Until the new user's credential reached the leader, a guess would skip the hashing.
    await eventually(
        lambda: _logs_in(leader, security(pki, "target", "target-secret", mechanism="PLAIN")),
        30,
        "the target user on the leader",
    )

    async def produce_round_trips(count: int) -> tuple[list[float], float]:
        conn = await connect("127.0.0.1", leader, security=alice)
        try:
            latencies = []
            started = trio.current_time()
            for _ in range(count):
                sent = trio.current_time()
                answer = await conn.request(produce)
                latencies.append(trio.current_time() - sent)
                partition = answer.responses[0].partition_responses[0]
                assert partition.error_code == ErrorCode.NONE
            return latencies, count / (trio.current_time() - started)
        finally:
            await conn.aclose()

    quiet, quiet_rate = await produce_round_trips(300)
    answers = tmp_path / "guesses.txt"
    logins: list[float] = []
    command = [sys.executable, "-m", "tests.integration.password_guesser", str(leader)]
    with answers.open("wb") as out:
        guesser = await trio.lowlevel.open_process([*command, str(pki.ca), "target"], stdout=out)
    try:
        await eventually(lambda: _has_lines(answers, 16), 30, "the guessing to be under way")
        flooded, flooded_rate = await produce_round_trips(300)
        for _ in range(5):
            started = trio.current_time()
            conn = await connect(
                "127.0.0.1",
                leader,
                security=security(pki, "alice", "alice-secret", mechanism="PLAIN"),
            )
            logins.append(trio.current_time() - started)
            await conn.aclose()
    finally:
        guesser.kill()
        await guesser.wait()
    lines = _text(answers).split()
    codes = lines[0::2]
    guesses = [float(seconds) for seconds in lines[1::2]]
    print(
        f"\nproduce round trip without guessing: p50 {_percentile(quiet, 0.5) * 1000:.1f} ms, "
        f"p99 {_percentile(quiet, 0.99) * 1000:.1f} ms, {quiet_rate:.0f}/s; under "
        f"{len(guesses)} wrong PLAIN logins (p50 {_percentile(guesses, 0.5) * 1000:.0f} ms, "
        f"p99 {_percentile(guesses, 0.99) * 1000:.0f} ms each): p50 "
        f"{_percentile(flooded, 0.5) * 1000:.1f} ms, p99 {_percentile(flooded, 0.99) * 1000:.1f} "
        f"ms, {flooded_rate:.0f}/s; alice's PLAIN logins meanwhile "
        f"{min(logins) * 1000:.0f}-{max(logins) * 1000:.0f} ms"
    )
    assert set(codes) == {str(int(ErrorCode.SASL_AUTHENTICATION_FAILED))}, set(codes)
    assert min(guesses) >= FAILED_AUTHENTICATION_DELAY_S
    # A loose bound for a shared, loaded 2-core machine: with the hashing on the event loop
    # the p99 was 340-690 ms (the median 30-135 ms, 9-12 round trips a second); with it in
    # threads, 60-120 ms.
    assert _percentile(flooded, 0.99) < 0.25
    assert max(logins) < 2.0


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _has_lines(path: Path, count: int) -> bool:
    return _text(path).count("\n") >= count


async def _logs_in(port: int, as_user: ClientSecurity) -> bool:
    try:
        conn = await connect("127.0.0.1", port, security=as_user)
    except AuthenticationFailedError:
        return False
    await conn.aclose()
    return True


async def test_replication_and_failover_work_among_authenticated_brokers(
    cluster: Cluster, pki: Pki
) -> None:
    """acks=all writes while the leader is killed (SIGKILL) and restarted: the brokers log in
    to each other again, and nothing acknowledged is lost."""
    await _topic(cluster, pki, "failover")
    await _grant(
        cluster,
        pki,
        [
            _allow("User:alice", "WRITE", "TOPIC", "failover"),
            _allow("User:bob", "READ", "TOPIC", "failover"),
        ],
    )
    await _wait_allowed(cluster, pki, "alice", "failover")
    await _wait_allowed(cluster, pki, "bob", "failover")
    meta = await _metadata(cluster.brokers[1].port_of("EXTERNAL"), security(pki), ["failover"])
    leader = meta.topics[0].partitions[0].leader_id
    futures = []
    survivors = ",".join(
        f"127.0.0.1:{b.port_of('EXTERNAL')}" for i, b in cluster.brokers.items() if i != leader
    )
    async with Producer(
        survivors, security=security(pki, "alice", "alice-secret"), acks="all", retries=1000
    ) as producer:
        for i in range(2000):
            if i == 500:
                cluster.brokers[leader].kill()
            value = f"v{i}".encode()
            futures.append((value, await producer.send("failover", value)))
            if i % 100 == 99:
                await producer.flush()
        await producer.flush()
    acked = [value for value, f in futures if f.done() and f.exception() is None]
    assert len(acked) > 1000
    cluster.brokers[leader].start()
    got: list[bytes] = []
    async with Consumer(
        survivors, security=security(pki, "bob", "bob-secret"), auto_offset_reset="earliest"
    ) as consumer:
        consumer.subscribe(["failover"])
        with trio.fail_after(60):
            while len(got) < len(acked):
                got.extend(r.value for r in await consumer.poll(timeout_ms=1000))
    assert set(acked) <= set(got)

    survivor = next(b for i, b in cluster.brokers.items() if i != leader)

    async def back_in_sync() -> bool:
        # Asked of a survivor: the restarted broker may not listen yet.
        meta = await _metadata(survivor.port_of("EXTERNAL"), security(pki), ["failover"])
        return len(meta.topics[0].partitions[0].isr_nodes) == 3

    await eventually(back_in_sync, 60, "the restarted broker back in the ISR over SASL")


async def test_consumer_group_requests_need_the_group_and_topic_acls(
    cluster: Cluster, pki: Pki
) -> None:
    """FindCoordinator needs DESCRIBE on the group; a join READ on it and DESCRIBE on each
    subscribed topic; a commit READ on the group and on each topic; OffsetFetch DESCRIBE on the
    group. Each refusal changes nothing: no member, no offset."""
    await _topic(cluster, pki, "invoices")
    group = "billing"
    bob = security(pki, "bob", "bob-secret")
    asked = cluster.brokers[1].port_of("EXTERNAL")

    async def request(port: int, as_user: ClientSecurity, body: object) -> Any:
        conn = await connect("127.0.0.1", port, security=as_user)
        try:
            return await conn.request(body)
        finally:
            await conn.aclose()

    async def find() -> Coordinator:
        answer: FindCoordinatorResponse = await request(
            asked, bob, FindCoordinatorRequest((group,))
        )
        return answer.coordinators[0]

    assert (await find()).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    await _grant(cluster, pki, [_allow("User:bob", "READ", "GROUP", group)])

    async def found() -> bool:
        return (await find()).error_code == ErrorCode.NONE

    await eventually(found, 60, "bob allowed to find the group's coordinator")
    coordinator = await find()
    port = coordinator.port
    assert port == cluster.brokers[coordinator.node_id].port_of("EXTERNAL")
    join = ConsumerGroupHeartbeatRequest(
        group,
        "",
        0,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=("invoices",),
        topic_partitions=(),
    )

    async def join_refused_for_the_topic() -> bool:
        answer: ConsumerGroupHeartbeatResponse = await request(port, bob, join)
        assert answer.error_code != ErrorCode.NONE, answer
        return answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    await eventually(join_refused_for_the_topic, 30, "the coordinator to know bob's group ACL")
    outsider_commit = OffsetCommitRequest(
        group, (OffsetCommitTopic("invoices", (OffsetCommitPartition(0, 3),)),)
    )
    refused: OffsetCommitResponse = await request(port, bob, outsider_commit)
    assert refused.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    eve_fetch: OffsetFetchResponse = await request(
        port, security(pki, "eve", "eve-secret"), OffsetFetchRequest(group)
    )
    assert eve_fetch.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    described: ConsumerGroupDescribeResponse = await request(
        port, security(pki), ConsumerGroupDescribeRequest((group,))
    )
    assert described.groups[0].members == ()
    offsets: OffsetFetchResponse = await request(port, security(pki), OffsetFetchRequest(group))
    assert offsets.error_code == ErrorCode.NONE and offsets.topics == ()

    await _grant(cluster, pki, [_allow("User:bob", "READ", "TOPIC", "invoices")])

    joins: list[ConsumerGroupHeartbeatResponse] = []

    async def joined() -> bool:
        answer: ConsumerGroupHeartbeatResponse = await request(port, bob, join)
        if answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            return False
        assert answer.error_code == ErrorCode.NONE, answer
        joins.append(answer)
        return True

    await eventually(joined, 30, "the coordinator to know bob's topic ACL")
    (answer,) = joins
    assert answer.member_id and answer.assignment is not None, answer
    conn = await connect("127.0.0.1", port, security=bob)
    try:
        member = Member(group, answer.member_id, answer.member_epoch, ())
        member = await settle(conn, member, answer.assignment.topic_partitions)
        await commit(conn, member, {("invoices", 0): (3, None)})  # asserts no error
        left: ConsumerGroupHeartbeatResponse = await conn.request(
            ConsumerGroupHeartbeatRequest(group, member.member_id, -1)
        )
        assert left.error_code == ErrorCode.NONE, left
    finally:
        await conn.aclose()
    offsets = await request(port, security(pki), OffsetFetchRequest(group))
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
            for t in offsets.topics] == [("invoices", [(0, 3)])]  # fmt: skip


async def test_group_apis_do_not_name_topics_the_member_may_not_describe(
    cluster: Cluster, pki: Pki
) -> None:
    """The security review's probe: gina (READ on her group, DESCRIBE on one topic) joined
    with the regex `.*` and was assigned the admin's topic, and ConsumerGroupDescribe showed
    it. Her regex now resolves only over topics she may describe, and describing a group that
    uses a topic she may not is TOPIC_AUTHORIZATION_FAILED, with no members."""
    await _topic(cluster, pki, "secret-payroll", partitions=2)
    await _topic(cluster, pki, "gina-public")
    async with Admin(external(cluster), security=security(pki)) as admin:
        await upsert_user(admin, "gina", "gina-secret")
    await _grant(
        cluster,
        pki,
        [
            _allow("User:gina", "READ", "GROUP", "g-gina"),
            _allow("User:gina", "DESCRIBE", "GROUP", "payroll-app"),
            _allow("User:gina", "DESCRIBE", "TOPIC", "gina-public"),
        ],
    )
    await _wait_allowed(cluster, pki, "gina", "gina-public")
    gina, admin_login = security(pki, "gina", "gina-secret"), security(pki)

    async def request(port: int, as_user: ClientSecurity, body: object) -> Any:
        conn = await connect("127.0.0.1", port, security=as_user)
        try:
            return await conn.request(body)
        finally:
            await conn.aclose()

    async def coordinator_port(group: str) -> int:
        async def found() -> int | None:
            asked = cluster.brokers[1].port_of("EXTERNAL")
            answer = await request(asked, admin_login, FindCoordinatorRequest((group,)))
            (coordinator,) = answer.coordinators
            return coordinator.port if coordinator.error_code == ErrorCode.NONE else None

        return await eventually(found, 60, f"the coordinator of {group}")

    def joining(group: str, **subscription: Any) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group, "", 0, rebalance_timeout_ms=60_000, topic_partitions=(), **subscription
        )

    payroll_port = await coordinator_port("payroll-app")
    admins: ConsumerGroupHeartbeatResponse = await request(
        payroll_port,
        admin_login,
        joining("payroll-app", subscribed_topic_names=("secret-payroll",)),
    )
    assert admins.error_code == ErrorCode.NONE, admins
    gina_port = await coordinator_port("g-gina")
    joins: list[ConsumerGroupHeartbeatResponse] = []

    async def gina_joined() -> bool:
        answer: ConsumerGroupHeartbeatResponse = await request(
            gina_port, gina, joining("g-gina", subscribed_topic_regex=".*")
        )
        if answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            return False  # her group ACL has not reached the coordinator yet
        joins.append(answer)
        return True

    await eventually(gina_joined, 30, "gina's group ACL on the coordinator")
    (joined,) = joins
    assert joined.error_code == ErrorCode.NONE and joined.assignment is not None, joined
    assert {t.topic for t in joined.assignment.topic_partitions} == {"gina-public"}
    own: ConsumerGroupDescribeResponse = await request(
        gina_port, gina, ConsumerGroupDescribeRequest(("g-gina",))
    )
    (described,) = own.groups
    assert described.error_code == ErrorCode.NONE, described
    seen = {a.topic for m in described.members for a in (*m.assignment, *m.target_assignment)}
    assert seen == {"gina-public"}
    theirs: ConsumerGroupDescribeResponse = await request(
        payroll_port, gina, ConsumerGroupDescribeRequest(("payroll-app",))
    )
    (hidden,) = theirs.groups
    assert hidden.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, hidden
    assert hidden.members == () and "secret-payroll" not in repr(hidden)
    as_admin: ConsumerGroupDescribeResponse = await request(
        payroll_port, admin_login, ConsumerGroupDescribeRequest(("payroll-app",))
    )
    assert as_admin.groups[0].error_code == ErrorCode.NONE
    assert as_admin.groups[0].members[0].subscribed_topic_names == ("secret-payroll",)
