"""ZooKeeper ACLs (Kafka's `zookeeper.set.acl`): with them, a ZooKeeper client without the
brokers' digest login can neither read credentials nor change credentials, /controller or
partition state, while the brokers work as before; `highwater zookeeper-security-migration`
secures a tree made without them (and `unsecure` opens it again)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer
from client.producer import Producer
from client.security import ClientSecurity
from client.security_admin import upsert_user
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata
from tests.integration.secure_cluster import (
    BROKER_PASSWORD,
    ZOOKEEPER_LOGIN,
    Pki,
    make_pki,
    secure_cluster,
    security,
    zookeeper_acl_settings,
)

pytestmark = pytest.mark.timeout(300)

SENSITIVE = ("/config/users", "/config/brokers")
READ, ALL = 1, 31


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@contextmanager
def _zk(cluster: Cluster, login: tuple[str, str] | None = None) -> Iterator[KazooClient]:
    """A kazoo client on the cluster's chroot, anonymous or with a digest login."""
    auth = None if login is None else [("digest", f"{login[0]}:{login[1]}")]
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=5.0, auth_data=auth)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _refused(call: Callable[[], object]) -> bool:
    try:
        call()
    except NoAuthError:
        return True
    return False


def _anonymous_refusals(cluster: Cluster, user: str, topic: str) -> dict[str, bool]:
    """What an anonymous ZooKeeper client tries, and whether ZooKeeper refused it."""
    state = f"/brokers/topics/{topic}/partitions/0/state"
    with _zk(cluster) as zk:
        return {
            "set credential": _refused(lambda: zk.set(f"/config/users/{user}", b'{"x":1}')),
            "read credential": _refused(lambda: zk.get(f"/config/users/{user}")),
            "list users": _refused(lambda: zk.get_children("/config/users")),
            "set /controller": _refused(lambda: zk.set("/controller", b'{"brokerid":99}')),
            "delete /controller": _refused(lambda: zk.delete("/controller")),
            "set /controller_epoch": _refused(lambda: zk.set("/controller_epoch", b"999")),
            "set partition state": _refused(lambda: zk.set(state, b"{}")),
            "register a broker": _refused(lambda: zk.create("/brokers/ids/99", b"{}")),
            "open /config/users": _refused(lambda: zk.set_acls("/config/users", [_world(ALL)])),
        }


def _world(perms: int) -> ACL:
    return ACL(perms, Id("world", "anyone"))


def _loose_znodes(cluster: Cluster) -> list[str]:
    """Every znode of the cluster (its chroot included) whose ACLs give the world more than
    READ, or any right at all on credentials and broker configs."""
    loose: list[str] = []
    with _zk(cluster, ZOOKEEPER_LOGIN) as zk:

        def walk(path: str) -> None:
            acls, _ = zk.get_acls(path)
            world = sum(a.perms for a in acls if a.id.scheme == "world")
            sensitive = any(path == s or path.startswith(s + "/") for s in SENSITIVE)
            if world & ~READ or (sensitive and world):
                loose.append(f"{path}: {acls}")
            for child in zk.get_children(path):
                walk(f"{path.rstrip('/')}/{child}")

        walk("/")
    return loose


async def _produce_and_consume(
    bootstrap: str, topic: str, tag: str, security: ClientSecurity | None = None
) -> None:
    values = [f"{tag}-{i}".encode() for i in range(20)]
    async with Producer(bootstrap, security=security, acks="all") as producer:
        for value in values:
            await producer.send(topic, value)
        await producer.flush()
    got: list[bytes] = []
    async with Consumer(bootstrap, security=security, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        with trio.fail_after(60):
            while not set(values) <= set(got):
                got.extend(r.value for r in await consumer.poll(timeout_ms=500) if r.value)


async def _whole(cluster: Cluster, listener: str, login: ClientSecurity | None) -> None:
    async def whole() -> bool:
        for broker in cluster.running_brokers():
            meta = await fetch_metadata(broker.port_of(listener), timeout_ms=5000, security=login)
            if meta is None or len(meta.brokers) != len(cluster.running_brokers()):
                return False
            if meta.controller_id < 0:
                return False
        return True

    await eventually(whole, 90, f"a whole cluster of {len(cluster.running_brokers())}")


async def test_with_set_acl_only_the_brokers_zookeeper_login_may_change_the_cluster(
    zookeeper: ZooKeeperServer, tmp_path: Path, pki: Pki
) -> None:
    cluster = secure_cluster(zookeeper.port, tmp_path, 2, pki, zookeeper_acl=True)
    cluster.start()
    try:
        as_broker = security(pki, "broker", BROKER_PASSWORD)
        await _whole(cluster, "EXTERNAL", as_broker)
        bootstrap = cluster.bootstrap_on("EXTERNAL")
        async with Admin(bootstrap, security=as_broker) as admin:
            await upsert_user(admin, "admin", "admin-secret")
            await admin.create_topic("payroll", partitions=1, replication_factor=2)
        await _produce_and_consume(bootstrap, "payroll", "first", security(pki))

        refusals = await trio.to_thread.run_sync(_anonymous_refusals, cluster, "admin", "payroll")
        assert refusals == dict.fromkeys(refusals, True)
        with _zk(cluster, ("zk-broker", "a-wrong-password")) as zk:
            assert _refused(lambda: zk.set("/config/users/admin", b"{}"))
        with _zk(cluster) as zk:  # the rest stays readable, as in Kafka
            assert zk.get("/brokers/topics/payroll/partitions/0/state")[0]
        assert await trio.to_thread.run_sync(_loose_znodes, cluster) == []

        # The other broker takes over as controller: it rewrites /controller, the epoch and
        # the partition state the first one created (one login for all brokers).
        with _zk(cluster) as zk:
            first = int(json.loads(zk.get("/controller")[0])["brokerid"])
        cluster.brokers[first].stop()
        await _whole(cluster, "EXTERNAL", as_broker)
        await _produce_and_consume(bootstrap, "payroll", "after-failover", security(pki))
        cluster.brokers[first].start()
        await _whole(cluster, "EXTERNAL", as_broker)
        assert await trio.to_thread.run_sync(_loose_znodes, cluster) == []
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def _migrate(broker_config: Path, acl: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", "zookeeper-security-migration",
         "--zookeeper.acl", acl, "--config", str(broker_config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def test_the_migration_secures_a_cluster_made_without_acls_and_unsecure_reverts_it(
    zookeeper: ZooKeeperServer, tmp_path: Path, pki: Pki
) -> None:
    cluster = secure_cluster(zookeeper.port, tmp_path, 1, pki)
    broker = cluster.brokers[1]
    cluster.start()
    try:
        as_broker = security(pki, "broker", BROKER_PASSWORD)
        await _whole(cluster, "EXTERNAL", as_broker)
        bootstrap = cluster.bootstrap_on("EXTERNAL")
        async with Admin(bootstrap, security=as_broker) as admin:
            await upsert_user(admin, "admin", "admin-secret")
            await admin.create_topic("before", partitions=1, replication_factor=1)
        await _produce_and_consume(bootstrap, "before", "first", security(pki))
        with _zk(cluster) as zk:  # the hole: anyone may rewrite a credential
            credential, _ = zk.get("/config/users/admin")
            zk.set("/config/users/admin", credential)

        # Kafka's order: the brokers get the login and zookeeper.set.acl, then the migration.
        broker.overrides.update(zookeeper_acl_settings())
        broker.restart()
        await _whole(cluster, "EXTERNAL", as_broker)
        with _zk(cluster) as zk:  # zookeeper.set.acl alone leaves existing znodes open
            zk.set("/config/users/admin", credential)
            acls, _ = zk.get_acls("/brokers/topics/before/partitions/0/state")
            assert [(a.perms, a.id.scheme) for a in acls] == [(ALL, "world")]
        done = _migrate(broker.config_path, "secure")
        assert done.returncode == 0, done.stderr
        assert "set to secure" in done.stdout
        refusals = await trio.to_thread.run_sync(_anonymous_refusals, cluster, "admin", "before")
        assert refusals == dict.fromkeys(refusals, True)
        assert await trio.to_thread.run_sync(_loose_znodes, cluster) == []
        async with Admin(bootstrap, security=security(pki)) as admin:
            await admin.create_topic("after", partitions=1, replication_factor=1)
        await _produce_and_consume(bootstrap, "before", "second", security(pki))
        await _produce_and_consume(bootstrap, "after", "third", security(pki))

        done = _migrate(broker.config_path, "unsecure")
        assert done.returncode == 0, done.stderr
        with _zk(cluster) as zk:
            zk.set("/config/users/admin", zk.get("/config/users/admin")[0])
            acls, _ = zk.get_acls("/brokers/topics/before/partitions/0/state")
            assert [(a.perms, a.id.scheme) for a in acls] == [(ALL, "world")]
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
