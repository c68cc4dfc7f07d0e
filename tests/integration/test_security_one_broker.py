"""One secured broker (tests/integration/secure_cluster.py: SASL_SSL EXTERNAL, SASL_PLAINTEXT
INTERNAL, ACLs on, `User:admin` a super user) and `mallory`, a user with no ACLs: what she
cannot do to other principals' state, checked on the wire and in what it left behind."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import trio
from kazoo.client import KazooClient

from client.admin import Admin, ConfigResource
from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError
from client.network import BrokerConnection, connect
from client.security import ClientSecurity
from client.security_admin import AclQuery, describe_acls, upsert_user
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import Record, build_batch
from protocol.topic_partition import OFFSETS_TOPIC
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata, wait_until
from tests.integration.secure_cluster import (
    Pki,
    make_pki,
    secure_cluster,
    security,
    wait_for_secured_broker,
)

pytestmark = pytest.mark.timeout(300)

TOPIC = "payroll"
CONSUMER = -1


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    cluster = secure_cluster(zookeeper.port, tmp_path_factory.mktemp("secure-one"), 1, pki)
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
    """The broker up; users admin and mallory; the admin's topic."""
    as_broker = await wait_for_secured_broker(cluster, pki)
    port = cluster.brokers[1].port_of("EXTERNAL")
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=as_broker) as admin:
        for user in ("admin", "mallory"):
            await upsert_user(admin, user, f"{user}-secret")
        await admin.create_topic(TOPIC, partitions=1, replication_factor=1)

    async def logged_in() -> bool:
        for user in ("admin", "mallory"):
            if await fetch_metadata(port, security=security(pki, user, f"{user}-secret")) is None:
                return False
        return True

    await eventually(logged_in, 30, "the users' credentials on the broker")


def _mallory(pki: Pki) -> ClientSecurity:
    return security(pki, "mallory", "mallory-secret")


async def _connect(cluster: Cluster, as_user: ClientSecurity, listener: str) -> BrokerConnection:
    return await connect("127.0.0.1", cluster.brokers[1].port_of(listener), security=as_user)


async def _fetch(
    conn: BrokerConnection,
    session_id: int,
    session_epoch: int,
    *,
    replica_id: int = CONSUMER,
    named: bool = True,
) -> FetchResponse:
    topics = (FetchTopic(TOPIC, (FetchPartition(0, 0, 1 << 20),)),) if named else ()
    response: FetchResponse = await conn.request(
        FetchRequest(
            replica_id,
            0,
            1,
            1 << 20,
            topics,
            session_id=session_id,
            session_epoch=session_epoch,
        )
    )
    return response


async def test_fetch_sessions_are_random_and_only_their_owner_may_use_or_close_them(
    cluster: Cluster, pki: Pki
) -> None:
    admin = await _connect(cluster, security(pki), "EXTERNAL")
    mallory = await _connect(cluster, _mallory(pki), "EXTERNAL")
    admin_internal = await _connect(cluster, security(pki, protocol="SASL_PLAINTEXT"), "INTERNAL")
    try:
        ids = []
        for _ in range(3):
            opened = await _fetch(admin, 0, INITIAL_EPOCH)
            assert opened.error_code == ErrorCode.NONE and opened.session_id != 0
            ids.append(opened.session_id)
        assert len(set(ids)) == 3
        assert all(abs(b - a) > 1 for a, b in itertools.pairwise(ids)), ids
        sid = ids[-1]

        # Mallory's incremental fetch in the admin's session: as if it did not exist.
        stolen = await _fetch(mallory, sid, 1, named=False)
        assert stolen.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert stolen.responses == ()
        # So is the admin's own, from another listener.
        elsewhere = await _fetch(admin_internal, sid, 1, named=False)
        assert elsewhere.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # Her requests to close it (a full fetch naming it; the final epoch) leave it open.
        closing = await _fetch(mallory, sid, INITIAL_EPOCH)
        assert closing.session_id not in (0, sid)
        assert closing.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        await _fetch(mallory, sid, FINAL_EPOCH)

        # The admin's session goes on, at the epoch he left it.
        mine = await _fetch(admin, sid, 1, named=False)
        assert (mine.error_code, mine.session_id) == (ErrorCode.NONE, sid)

        # A follower's fetch without CLUSTER_ACTION opens no (privileged) session.
        follower = await _fetch(mallory, 0, INITIAL_EPOCH, replica_id=2)
        assert follower.session_id == 0
        assert (
            follower.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
    finally:
        for conn in (admin, mallory, admin_internal):
            await conn.aclose()


def _topic_in_zookeeper(cluster: Cluster, topic: str) -> bool:
    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=5.0)
    zk.start(timeout=10)
    try:
        return zk.exists(f"/brokers/topics/{topic}") is not None
    finally:
        zk.stop()
        zk.close()


async def _find_coordinator(conn: BrokerConnection, group: str) -> FindCoordinatorResponse:
    response: FindCoordinatorResponse = await conn.request(FindCoordinatorRequest((group,)))
    return response


async def test_an_unauthorized_find_coordinator_creates_no_offsets_topic(
    cluster: Cluster, pki: Pki
) -> None:
    assert not _topic_in_zookeeper(cluster, OFFSETS_TOPIC)
    mallory = await _connect(cluster, _mallory(pki), "EXTERNAL")
    try:
        refused = await _find_coordinator(mallory, "payroll-app")
    finally:
        await mallory.aclose()
    assert refused.coordinators[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert (
        refused.coordinators[0].error_message == "User:mallory may not DESCRIBE group payroll-app"
    )
    assert not _topic_in_zookeeper(cluster, OFFSETS_TOPIC)
    # The same request from a principal allowed to describe the group creates it.
    admin = await _connect(cluster, security(pki), "EXTERNAL")
    try:
        allowed = await _find_coordinator(admin, "payroll-app")
    finally:
        await admin.aclose()
    assert allowed.coordinators[0].error_code in (
        ErrorCode.NONE,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,  # created, leaders not elected yet
    )
    assert _topic_in_zookeeper(cluster, OFFSETS_TOPIC)


async def test_a_refusal_names_the_principal_the_operation_and_the_resource(
    cluster: Cluster, pki: Pki
) -> None:
    """Where a response has an error_message, an authorization refusal says who may not do
    what on which resource (Kafka's says only "Not authorized to access topics: [x]")."""
    refusals = []
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=_mallory(pki)) as admin:
        for attempt in (
            admin.create_topic("mallorys", partitions=1, replication_factor=1),
            admin.delete_topic(TOPIC),
            admin.describe_configs([ConfigResource.topic(TOPIC)]),
            admin.describe_configs([ConfigResource.broker(1)]),
            describe_acls(admin, AclQuery()),
        ):
            with pytest.raises(HighwaterClientError) as refused:
                await attempt
            refusals.append(str(refused.value))
    assert refusals == [
        "TOPIC_AUTHORIZATION_FAILED: create topic 'mallorys' "
        "(User:mallory may not CREATE topic mallorys)",
        f"TOPIC_AUTHORIZATION_FAILED: delete topic '{TOPIC}' "
        f"(User:mallory may not DELETE topic {TOPIC})",
        f"TOPIC_AUTHORIZATION_FAILED: describe configs of topic '{TOPIC}' "
        f"(User:mallory may not DESCRIBE_CONFIGS topic {TOPIC})",
        "CLUSTER_AUTHORIZATION_FAILED: describe configs of broker 1 "
        "(User:mallory may not DESCRIBE_CONFIGS cluster kafka-cluster)",
        "CLUSTER_AUTHORIZATION_FAILED: list ACLs "
        "(User:mallory may not DESCRIBE cluster kafka-cluster)",
    ]
    mallory = await _connect(cluster, _mallory(pki), "EXTERNAL")
    try:
        batch = build_batch([Record(b"forged")], now_ms=1000)
        written: ProduceResponse = await mallory.request(
            ProduceRequest(1, 5000, (ProduceTopicData(TOPIC, (ProducePartitionData(0, batch),)),))
        )
    finally:
        await mallory.aclose()
    answer = written.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert answer.error_message == f"User:mallory may not WRITE topic {TOPIC}"


async def test_metadata_logs_a_denial_only_for_a_topic_named(cluster: Cluster, pki: Pki) -> None:
    """Hiding a topic from "all topics" is no denial (Kafka asks with logIfDenied = false);
    refusing one asked for by name is logged."""
    marks = cluster.log_marks()
    mallory = await _connect(cluster, _mallory(pki), "EXTERNAL")
    try:
        for _ in range(3):
            everything: MetadataResponse = await mallory.request(MetadataRequest(None))
            assert TOPIC not in {t.name for t in everything.topics}
        named: MetadataResponse = await mallory.request(MetadataRequest([TOPIC]))
        assert named.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        await mallory.aclose()

    def denials() -> int:
        return sum(
            '"event": "denied"' in line
            and '"principal": "User:mallory"' in line
            and f'"resource": "TOPIC:{TOPIC}"' in line
            for line in cluster.logs(tail_chars=1 << 20, since=marks).splitlines()
        )

    # Lines are written in order: once the named refusal is there, the others would be too.
    wait_until(denials, 10, "the named refusal in the broker's log")
    assert denials() == 1, cluster.logs(since=marks)
