"""The metrics listener on a secured 2-broker cluster (tests/integration/secure_cluster.py:
SASL_PLAINTEXT between brokers, SASL_SSL for clients, ACLs): https with the test CA, HTTP basic
authentication against the SCRAM users, /api/cluster and /api/history filtered by the user's
DESCRIBE ACLs, /metrics for cluster DESCRIBE only, peers reached with the inter-broker security
(shown up, not unreachable), password checks that do not stall the Kafka listener, and a broker
that refuses to start with an unauthenticated listener that others could reach."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.config.settings import ACL_AUTHORIZER
from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from client.network import connect
from client.security_admin import Acl, create_acls, upsert_user
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
)
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata, wait_until
from tests.integration.secure_cluster import (
    ADMIN_PASSWORD,
    BROKER_PASSWORD,
    Pki,
    make_pki,
    secure_cluster,
    security,
)
from tests.integration.test_metrics_http import assert_not_slowed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MINE = "alice-orders"  # alice may describe it (READ implies DESCRIBE)
SECRET = "payroll"  # only the super users may
HttpAnswer = tuple[int, bytes, Mapping[str, str]]
GUESSERS = 6  # clients guessing passwords at once


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    cluster = secure_cluster(zookeeper.port, tmp_path_factory.mktemp("http-secure"), 2, pki)
    for broker in cluster.brokers.values():
        broker.overrides["metrics.listener"] = f"https://127.0.0.1:{free_port()}"
        broker.overrides["metrics.listener.authentication.method"] = "basic"
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
    """Both brokers up; users admin, alice and mallory; topics alice-orders and payroll (on
    both brokers); alice may read alice-orders and group alice-app; offsets committed for
    alice-app and payroll-app."""
    as_broker = security(pki, "broker", BROKER_PASSWORD)

    async def whole() -> bool:
        for broker in cluster.brokers.values():
            meta = await fetch_metadata(
                broker.port_of("EXTERNAL"), timeout_ms=5000, security=as_broker
            )
            if meta is None or len(meta.brokers) != 2 or meta.controller_id < 0:
                return False
        return True

    await eventually(whole, 90, "a whole secured cluster")
    bootstrap = cluster.bootstrap_on("EXTERNAL")
    async with Admin(bootstrap, security=as_broker) as admin:
        for user in ("admin", "alice", "mallory"):
            await upsert_user(admin, user, f"{user}-secret")
        # The costliest credential Kafka allows: 16384 PBKDF2 iterations per check.
        await upsert_user(admin, "slow", "slow-secret", iterations=16384)
        for topic in (MINE, SECRET):
            await admin.create_topic(topic, partitions=2, replication_factor=2)
        await create_acls(
            admin,
            [
                Acl("TOPIC", MINE, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                Acl("GROUP", "alice-app", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
            ],
        )
    await _commit(cluster, pki, "alice-app", MINE)
    await _commit(cluster, pki, "payroll-app", SECRET)


async def _commit(cluster: Cluster, pki: Pki, group: str, topic: str) -> None:
    """Offset 0 of both partitions for `group`, committed by the admin at its coordinator."""
    as_admin = security(pki)
    port = cluster.brokers[1].port_of("EXTERNAL")

    async def committed() -> bool:
        conn = await connect("127.0.0.1", port, security=as_admin)
        try:
            found = await conn.request(FindCoordinatorRequest((group,)))
            (coordinator,) = found.coordinators
            if coordinator.error_code != ErrorCode.NONE:
                return False
        finally:
            await conn.aclose()
        target = cluster.brokers[coordinator.node_id].port_of("EXTERNAL")
        conn = await connect("127.0.0.1", target, security=as_admin)
        try:
            partitions = (OffsetCommitPartition(0, 0), OffsetCommitPartition(1, 0))
            answer = await conn.request(
                OffsetCommitRequest(group, (OffsetCommitTopic(topic, partitions),))
            )
        finally:
            await conn.aclose()
        return {p.error_code for t in answer.topics for p in t.partitions} == {ErrorCode.NONE}

    await eventually(committed, 60, f"offsets of {group} committed")


def _url(cluster: Cluster, broker_id: int, path: str) -> str:
    return cluster.brokers[broker_id].overrides["metrics.listener"] + path


def _trusting(pki: Pki) -> ssl.SSLContext:
    """A client that trusts only the test CA and checks the host name (127.0.0.1)."""
    return ssl.create_default_context(cafile=str(pki.ca))


def get(url: str, pki: Pki, user: str | None = None, password: str | None = None) -> HttpAnswer:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=_trusting(pki)) as response:
            return int(response.status), response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read(), dict(exc.headers)


def cluster_as(cluster: Cluster, pki: Pki, user: str, broker_id: int = 1) -> dict[str, Any]:
    status, body, _ = get(_url(cluster, broker_id, "/api/cluster"), pki, user, f"{user}-secret")
    assert status == 200, (status, body[:200])
    found: dict[str, Any] = json.loads(body)
    return found


def test_without_or_with_wrong_credentials_every_path_answers_401(
    cluster: Cluster, pki: Pki
) -> None:
    for path in ("/api/cluster", "/api/history", "/", "/metrics"):
        url = _url(cluster, 1, path)
        for user, password in ((None, None), ("alice", "wrong"), ("nobody", "alice-secret")):
            status, body, headers = get(url, pki, user, password)
            assert status == 401, (path, user, status)
            assert headers["www-authenticate"].startswith('Basic realm="highwater"')
            assert b"alice-orders" not in body and b"payroll" not in body


def test_https_needs_the_ca_and_refuses_plain_http(cluster: Cluster, pki: Pki) -> None:
    url = _url(cluster, 1, "/api/cluster")
    assert url.startswith("https://127.0.0.1:")
    assert get(url, pki, "admin", ADMIN_PASSWORD)[0] == 200
    # A client that trusts only another CA refuses the broker's certificate.
    other = ssl.create_default_context(cafile=str(pki.other_ca))
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url, timeout=10, context=other)
    # Plain HTTP to the TLS port gets no answer.
    with pytest.raises(OSError):  # the handshake fails: closed without an HTTP answer
        urllib.request.urlopen(url.replace("https://", "http://"), timeout=10)


def test_a_user_sees_only_the_topics_and_groups_it_may_describe(cluster: Cluster, pki: Pki) -> None:
    def alice_sees_hers() -> dict[str, Any] | None:
        seen = cluster_as(cluster, pki, "alice")
        groups = [g["name"] for g in seen["groups"]]
        return seen if groups == ["alice-app"] else None

    seen = wait_until(alice_sees_hers, 30, "alice's group on the status page")
    assert [t["name"] for t in seen["topics"]] == [MINE]
    (group,) = seen["groups"]
    assert {r["topic"] for r in group["partitions"]} == {MINE}
    # Brokers are listed (as Metadata lists them), counting only alice-orders' partitions.
    assert sum(b["leaders"] for b in seen["brokers"]) == 2
    assert SECRET.encode() not in json.dumps(seen).encode()
    # mallory, with no ACLs, sees no topic and no group.
    nothing = cluster_as(cluster, pki, "mallory")
    assert (nothing["topics"], nothing["groups"]) == ([], [])
    # The super user sees everything, on either broker.

    def admin_sees_all() -> dict[str, Any] | None:
        everything = cluster_as(cluster, pki, "admin", broker_id=2)
        names = {g["name"] for g in everything["groups"]}
        return everything if {"alice-app", "payroll-app"} <= names else None

    everything = wait_until(admin_sees_all, 30, "both groups for the admin")
    assert {MINE, SECRET} <= {t["name"] for t in everything["topics"]}


def history_as(cluster: Cluster, pki: Pki, user: str) -> dict[str, Any]:
    status, body, _ = get(_url(cluster, 1, "/api/history"), pki, user, f"{user}-secret")
    assert status == 200, (status, body[:200])
    found: dict[str, Any] = json.loads(body)
    return found


def test_the_history_shows_only_the_topics_and_groups_a_user_may_describe(
    cluster: Cluster, pki: Pki
) -> None:
    def admin_history_has_both() -> dict[str, Any] | None:
        status, body, _ = get(_url(cluster, 1, "/api/history"), pki, "admin", ADMIN_PASSWORD)
        assert status == 200
        found: dict[str, Any] = json.loads(body)
        groups = {g["name"] for g in found["groups"]}
        return found if {"alice-app", "payroll-app"} <= groups else None

    # Sampled every 10 s: both groups are in the history after at most two samples.
    everything = wait_until(admin_history_has_both, 40, "both groups in the admin's history")
    assert {MINE, SECRET} <= {t["name"] for t in everything["topics"]}
    seen = history_as(cluster, pki, "alice")
    assert [t["name"] for t in seen["topics"]] == [MINE]
    assert [g["name"] for g in seen["groups"]] == ["alice-app"]
    assert len(seen["times_ms"]) >= 1
    assert SECRET.encode() not in json.dumps(seen).encode()
    nothing = history_as(cluster, pki, "mallory")
    assert (nothing["topics"], nothing["groups"]) == ([], [])
    assert set(nothing["under_replicated"]) <= {None}  # no topic: no count, not the cluster's


def test_metrics_need_describe_on_the_cluster(cluster: Cluster, pki: Pki) -> None:
    url = _url(cluster, 1, "/metrics")
    status, body, _ = get(url, pki, "alice", "alice-secret")
    assert status == 403
    assert b"highwater_" not in body
    status, body, _ = get(url, pki, "admin", ADMIN_PASSWORD)
    assert status == 200
    assert b"highwater_http_connections " in body
    # The status page itself (the HTML) is for any authenticated user.
    assert get(_url(cluster, 1, "/"), pki, "alice", "alice-secret")[0] == 200


def test_peers_are_reached_through_the_inter_broker_security(cluster: Cluster, pki: Pki) -> None:
    """Broker 1 asks broker 2 over its SASL_PLAINTEXT inter-broker listener, as the broker
    user: broker 2 shows up, and the partitions it leads or hosts have their figures."""

    def whole_picture() -> dict[str, Any] | None:
        seen = cluster_as(cluster, pki, "admin")
        statuses = {b["id"]: b["status"] for b in seen["brokers"]}
        rows = [r for t in seen["topics"] if t["name"] == SECRET for r in t["partitions"]]
        known = rows and all(
            r["high_watermark"] is not None and None not in r["log_end_offsets"].values()
            for r in rows
        )
        return seen if statuses == {1: "up", 2: "up"} and known else None

    seen = wait_until(whole_picture, 30, "broker 2 up, with its offsets, on broker 1's page")
    rows = [r for t in seen["topics"] if t["name"] == SECRET for r in t["partitions"]]
    assert {r["leader"] for r in rows} <= {1, 2}
    assert all(set(r["log_end_offsets"]) == {"1", "2"} for r in rows)


def test_a_broker_refuses_an_unauthenticated_listener_others_can_reach(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    overrides = {
        "authorizer.class.name": ACL_AUTHORIZER,
        "super.users": "User:admin",
        "metrics.listener": f"http://0.0.0.0:{free_port()}",
    }
    refused = Cluster(zookeeper.port, tmp_path / "open", 1, overrides)
    broker = refused.brokers[1]
    broker.start()
    process = broker.process
    assert process is not None
    try:
        wait_until(lambda: process.poll() is not None, 30, "the broker to refuse to start")
    finally:
        refused.stop()
    assert process.returncode == 2  # a configuration error, as the CLI exits on one
    text = broker.log_text()
    assert "metrics.listener" in text
    assert "metrics.listener.authentication.method=basic" in text
    assert "metrics.listener.allow.unauthenticated=true" in text
    # Explicitly allowed, the same broker starts and serves the page to anyone.
    allowed = Cluster(
        zookeeper.port,
        tmp_path / "allowed",
        1,
        {**overrides, "metrics.listener.allow.unauthenticated": "true"},
    )
    allowed.start()
    try:
        url = allowed.brokers[1].overrides["metrics.listener"].replace("0.0.0.0", "127.0.0.1")

        def served() -> int | None:
            try:
                with urllib.request.urlopen(url + "/api/cluster", timeout=5) as response:
                    return int(response.status)
            except OSError:
                return None

        assert wait_until(served, 60, "the allowed open listener") == 200
    finally:
        allowed.stop()


async def test_password_checks_do_not_stall_the_kafka_listener(cluster: Cluster, pki: Pki) -> None:
    """A flood of wrong passwords (each a PBKDF2 run) on kept-alive https connections while a
    Kafka client's Metadata round trips are timed, against the same broker's without it."""
    port = cluster.brokers[1].port_of("EXTERNAL")
    conn = await connect("127.0.0.1", port, security=security(pki))

    async def latencies(duration_s: float) -> list[float]:
        out: list[float] = []
        end = trio.current_time() + duration_s
        while trio.current_time() < end:
            started = trio.current_time()
            await conn.request(MetadataRequest(None), timeout_ms=5000)
            out.append(trio.current_time() - started)
            await trio.sleep(0.02)  # a pace, not a synchronisation
        return out

    http_port = cluster.brokers[1].overrides["metrics.listener"].rpartition(":")[2]
    token = base64.b64encode(b"slow:wrong").decode()
    url = _url(cluster, 1, "/api/cluster")
    wait_until(lambda: get(url, pki, "slow", "slow-secret")[0] == 200, 30, "slow's credential")
    refused = 0

    def guess(stop: threading.Event) -> None:
        nonlocal refused
        client = http.client.HTTPSConnection("127.0.0.1", int(http_port), context=_trusting(pki))
        try:
            while not stop.is_set():
                client.request("GET", "/api/cluster", headers={"Authorization": f"Basic {token}"})
                answer = client.getresponse()
                answer.read()
                assert answer.status == 401
                refused += 1
        finally:
            client.close()

    try:
        quiet = await latencies(2.0)
        stop = threading.Event()
        async with trio.open_nursery() as nursery:
            for _ in range(GUESSERS):
                nursery.start_soon(partial(trio.to_thread.run_sync, guess, stop))
            try:
                abused = await latencies(3.0)
            finally:
                stop.set()
    finally:
        await conn.aclose()
    print(f"{refused} wrong passwords refused in 3 s")
    assert refused >= 10  # the flood did reach the password check
    assert_not_slowed(quiet, abused)
