"""Client quotas on a running cluster (real processes, real ZooKeeper): set with the CLI
(`configs alter --entity-type clients|users`), stored in ZooKeeper, followed by every broker;
a client-id with producer_byte_rate is throttled to about its quota (throttle_time_ms in the
responses, the connection muted meanwhile) while another client-id is not, and the metrics
show it per client; a consumer client-id with consumer_byte_rate likewise.

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
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, fetch_metadata
from tests.integration.metrics_checks import metrics_cluster, scrape, value
from tests.integration.quota_load import fetch_for, produce_for

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
    async def leader() -> BrokerProcess | None:
        meta = await fetch_metadata(cluster.brokers[1].port)
        for t in meta.topics if meta is not None else ():
            if t.name == topic and t.partitions and t.partitions[0].leader_id >= 0:
                return cluster.brokers[t.partitions[0].leader_id]
        return None

    return await eventually(leader, 30, f"a leader for {topic}")


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
        throttled, free = loads["throttled"], loads["free"]
        print(f"throttled: {throttled}, {throttled.rate_bytes_per_s:.0f} B/s")
        print(f"free: {free}, {free.rate_bytes_per_s:.0f} B/s")
        assert throttled.throttled > 0 and throttled.max_throttle_ms > 0
        assert throttled.rate_bytes_per_s <= 2 * QUOTA_BYTES_PER_S
        assert free.throttled == 0
        assert free.rate_bytes_per_s > 2 * QUOTA_BYTES_PER_S
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
        slow, fast = loads["slow-reader"], loads["fast-reader"]
        print(f"slow: {slow}, {slow.rate_bytes_per_s:.0f} B/s")
        print(f"fast: {fast}, {fast.rate_bytes_per_s:.0f} B/s")
        assert slow.throttled > 0 and slow.max_throttle_ms > 0
        assert slow.rate_bytes_per_s <= 2 * QUOTA_BYTES_PER_S
        assert fast.throttled == 0
        assert fast.rate_bytes_per_s > 2 * QUOTA_BYTES_PER_S
    finally:
        run_cli(cluster, "configs", "alter", *quota, "--delete-config", "consumer_byte_rate")
