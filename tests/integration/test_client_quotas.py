"""Client quotas on a running cluster (real processes, real ZooKeeper): set with the CLI
(`configs alter --entity-type clients|users`), stored in ZooKeeper, followed by every broker;
a client-id with producer_byte_rate is throttled to about its quota (throttle_time_ms in the
responses, the connection muted meanwhile) while another client-id is not, and the metrics
show it per client; a consumer client-id with consumer_byte_rate likewise, and one with
request_percentage on handler time. On a secured
cluster (SASL, ACLs, ZooKeeper ACLs) a quota applies to a user principal, and only who may
ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster manages quotas.

The cluster measures quotas over 2 windows of 1 s (quota.window.num): with Kafka's 11, a
client's first 10 s of quota come in one burst, and a short test would see mostly that."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError
from client.network import connect
from client.quota_admin import QuotaEntity, alter_client_quotas, describe_client_quotas
from client.security import ClientSecurity
from client.security_admin import upsert_user
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, fetch_metadata
from tests.integration.metrics_checks import metrics_cluster, scrape, value
from tests.integration.quota_load import ProduceLoad, fetch_for, produce_for
from tests.integration.secure_cluster import (
    ADMIN_PASSWORD,
    Pki,
    make_pki,
    secure_cluster,
    security,
    wait_for_secured_broker,
)

pytestmark = pytest.mark.timeout(300)

QUOTA_BYTES_PER_S = 256 * 1024
LOAD_S = 6.0


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    overrides = {"quota.window.num": "2"}
    with metrics_cluster(zookeeper.port, tmp_path_factory.mktemp("quotas"), overrides) as cluster:
        yield cluster


def run_cli(cluster: Cluster, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", *args, "-b", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def leader_of(cluster: Cluster, topic: str) -> BrokerProcess:
    async def leader_id(port: int) -> int:
        meta = await fetch_metadata(port)
        for t in meta.topics if meta is not None else ():
            if t.name == topic and t.partitions:
                return t.partitions[0].leader_id
        return -1

    async def leader() -> BrokerProcess | None:
        named = await leader_id(cluster.brokers[1].port)
        if named < 0:
            return None
        # The leader's own metadata names it only after its LeaderAndIsr (the controller
        # sends UpdateMetadata after): until then a produce to it is UNKNOWN_TOPIC_OR_PARTITION.
        broker = cluster.brokers[named]
        return broker if await leader_id(broker.port) == named else None

    return await eventually(leader, 30, f"a leader for {topic}")


def assert_held_to_quota(held: ProduceLoad, free: ProduceLoad) -> None:
    """The client with the quota was throttled and kept within twice it; the other client-id
    was never throttled and ran faster than that."""
    print(f"with the quota: {held}, {held.rate_bytes_per_s:.0f} B/s")
    print(f"without: {free}, {free.rate_bytes_per_s:.0f} B/s")
    assert held.throttled > 0 and held.max_throttle_ms > 0
    assert held.rate_bytes_per_s <= 2 * QUOTA_BYTES_PER_S
    assert free.throttled == 0
    assert free.rate_bytes_per_s > 2 * QUOTA_BYTES_PER_S


def test_quota_cli_round_trip(cluster: Cluster) -> None:
    """Each entity level a quota may be set at, set, described, then deleted."""
    for entity in (
        ["--entity-type", "users", "--entity-name", "alice"],
        ["--entity-type", "users", "--entity-default"],
        ["--entity-type", "clients", "--entity-name", "app/1"],
        ["--user", "alice", "--client-defaults"],
    ):
        out = run_cli(
            cluster,
            "configs",
            "alter",
            *entity,
            "--add-config",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152",
        )
        assert "Updated quota configs of" in out
    described = run_cli(cluster, "configs", "describe", "--entity-type", "users")
    assert described.splitlines() == [
        "Quota configs for the default user-principal are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
        "Quota configs for user-principal 'alice' are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
        "Quota configs for user-principal 'alice', the default client-id are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
    ]
    one = run_cli(
        cluster, "configs", "describe", "--entity-type", "clients", "--entity-name", "app/1"
    )
    assert one.strip() == (
        "Quota configs for client-id 'app/1' are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0"
    )
    for entity in (
        ["--entity-type", "users", "--entity-name", "alice"],
        ["--entity-type", "users", "--entity-default"],
        ["--entity-type", "clients", "--entity-name", "app/1"],
        ["--user", "alice", "--client-defaults"],
    ):
        run_cli(
            cluster,
            "configs",
            "alter",
            *entity,
            "--delete-config",
            "producer_byte_rate",
            "--delete-config",
            "consumer_byte_rate",
        )
    assert run_cli(cluster, "configs", "describe", "--entity-type", "users").strip() == (
        "No client quotas set."
    )


async def test_a_throttled_client_id_gets_its_quota_and_the_other_does_not(
    cluster: Cluster,
) -> None:
    topic = "quotas"
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 1)
    leader = await leader_of(cluster, topic)
    run_cli(
        cluster,
        "configs",
        "alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "throttled",
        "--add-config",
        f"producer_byte_rate={QUOTA_BYTES_PER_S}",
    )
    loads = {}

    async def run(client_id: str) -> None:
        # No back-off on the client's side: the broker's muting alone must hold it back.
        loads[client_id] = await produce_for(
            leader.host, leader.port, topic, client_id, LOAD_S, back_off=False
        )

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "throttled")
            nursery.start_soon(run, "free")
        assert_held_to_quota(loads["throttled"], loads["free"])
        found = scrape(leader)
        assert found is not None
        labels = {"quota_type": "Produce", "user": "", "client_id": "throttled"}
        assert value(found, "highwater_quota_limit", **labels) == QUOTA_BYTES_PER_S
        assert value(found, "highwater_quota_throttle_time_ms_total", **labels) > 0
        assert value(found, "highwater_quota_muted_seconds_total") > 0
    finally:
        run_cli(
            cluster,
            "configs",
            "alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "throttled",
            "--delete-config",
            "producer_byte_rate",
        )


async def test_a_consumer_client_id_gets_its_fetch_quota(cluster: Cluster) -> None:
    """consumer_byte_rate counts the records a consumer's Fetch responses carry."""
    topic = "quotas-fetch"
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 1)
    leader = await leader_of(cluster, topic)
    await produce_for(leader.host, leader.port, topic, "filler", 1.0)  # records to read
    quota = ("--entity-type", "clients", "--entity-name", "slow-reader")
    run_cli(
        cluster, "configs", "alter", *quota, f"--add-config=consumer_byte_rate={QUOTA_BYTES_PER_S}"
    )
    loads = {}

    async def run(client_id: str) -> None:
        loads[client_id] = await fetch_for(leader.host, leader.port, topic, client_id, LOAD_S)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "slow-reader")
            nursery.start_soon(run, "fast-reader")
        assert_held_to_quota(loads["slow-reader"], loads["fast-reader"])
    finally:
        run_cli(cluster, "configs", "alter", *quota, "--delete-config", "consumer_byte_rate")


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, Pki]]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    cluster = secure_cluster(
        zookeeper.port, tmp_path_factory.mktemp("quotas-secured"), 1, pki, zookeeper_acl=True
    )
    cluster.brokers[1].overrides["quota.window.num"] = "2"
    cluster.start()
    try:
        trio.run(_set_up_secured, cluster, pki)
        yield cluster, pki
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


async def _set_up_secured(cluster: Cluster, pki: Pki) -> None:
    as_broker = await wait_for_secured_broker(cluster, pki)
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=as_broker) as admin:
        for user, password in (("admin", ADMIN_PASSWORD), ("mallory", "mallory-secret")):
            await upsert_user(admin, user, password)
        await admin.create_topic("secured-quotas", 1, 1)
    port = cluster.brokers[1].port_of("EXTERNAL")

    async def logged_in() -> bool:
        for user, password in (("admin", ADMIN_PASSWORD), ("mallory", "mallory-secret")):
            if await fetch_metadata(port, security=security(pki, user, password)) is None:
                return False
        return True

    await eventually(logged_in, 30, "the users' credentials on the broker")


async def test_a_user_quota_throttles_that_principal_only(secured: tuple[Cluster, Pki]) -> None:
    cluster, pki = secured
    bootstrap = cluster.bootstrap_on("EXTERNAL")
    as_admin = security(pki)  # a super user
    as_broker = await wait_for_secured_broker(cluster, pki)
    as_mallory = security(pki, "mallory", "mallory-secret")
    admin_quota = QuotaEntity(user="admin")
    async with Admin(bootstrap, security=as_mallory) as mallory:
        for denied in (
            describe_client_quotas(mallory, admin_quota),
            alter_client_quotas(mallory, admin_quota, {"producer_byte_rate": 1}),
        ):
            with pytest.raises(HighwaterClientError) as refused:
                await denied
            assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    async with Admin(bootstrap, security=as_admin) as admin:
        await alter_client_quotas(admin, admin_quota, {"producer_byte_rate": QUOTA_BYTES_PER_S})
        assert await describe_client_quotas(admin, admin_quota) == {
            admin_quota: {"producer_byte_rate": QUOTA_BYTES_PER_S}
        }
    port = cluster.brokers[1].port_of("EXTERNAL")
    loads = {}

    async def run(user: str, as_user: ClientSecurity) -> None:
        loads[user] = await produce_for(
            "127.0.0.1", port, "secured-quotas", "app", LOAD_S, back_off=False, security=as_user
        )

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "admin", as_admin)
            nursery.start_soon(run, "broker", as_broker)
        throttled, free = loads["admin"], loads["broker"]
        print(f"admin: {throttled}, {throttled.rate_bytes_per_s:.0f} B/s")
        print(f"broker: {free}, {free.rate_bytes_per_s:.0f} B/s")
        assert throttled.throttled > 0
        assert throttled.rate_bytes_per_s <= 2 * QUOTA_BYTES_PER_S
        assert free.throttled == 0  # the same client-id, another user
        assert free.rate_bytes_per_s > 2 * QUOTA_BYTES_PER_S
    finally:
        async with Admin(bootstrap, security=as_admin) as admin:
            await alter_client_quotas(admin, admin_quota, {}, ["producer_byte_rate"])


async def test_request_percentage_throttles_a_busy_client_id(cluster: Cluster) -> None:
    """request_percentage charges handler time (KIP-124): a client-id allowed 0.01 % of a
    handler (0.1 ms per second) is throttled within a few Metadata requests; another is not."""
    quota = ("--entity-type", "clients", "--entity-name", "busy")
    run_cli(cluster, "configs", "alter", *quota, "--add-config", "request_percentage=0.01")
    broker = cluster.brokers[1]

    async def metadata_throttles(client_id: str, count: int, *, until_throttled: bool) -> list[int]:
        seen = []
        conn = await connect(broker.host, broker.port, client_id=client_id)
        try:
            with trio.fail_after(60):
                for _ in range(count):
                    response: MetadataResponse = await conn.request(
                        MetadataRequest(None), timeout_ms=30_000
                    )
                    seen.append(response.throttle_time_ms)
                    if until_throttled and response.throttle_time_ms > 0:
                        break
        finally:
            await conn.aclose()
        return seen

    try:
        assert max(await metadata_throttles("busy", 100, until_throttled=True)) > 0
        assert await metadata_throttles("idle", 20, until_throttled=False) == [0] * 20
    finally:
        run_cli(cluster, "configs", "alter", *quota, "--delete-config", "request_percentage")
