"""Re-authentication (KIP-368) and revoked credentials, on one secured broker
(tests/integration/secure_cluster.py) with `connections.max.reauth.ms=3000`: Highwater's
clients run past several session lifetimes without a reconnect, a connection that does not
re-authenticate is closed after its lifetime, and deleting or changing a user's credentials
closes that user's open connections."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import AuthenticationFailedError, HighwaterClientError
from client.network import connect
from client.producer import Producer
from client.producer.retry_notices import RetryNotice
from client.security import AuthenticationError, ClientSecurity
from client.security_admin import Acl, create_acls, upsert_user
from client.sync_network import connect_sync
from protocol.client_protocol import ClientProtocol, ReceivedResponse
from protocol.errors import ErrorCode
from protocol.framing import NEED_DATA
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.metadata import MetadataRequest
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, fetch_metadata
from tests.integration.replication_checks import logged_events
from tests.integration.secure_cluster import (
    ADMIN_PASSWORD,
    Pki,
    make_pki,
    secure_cluster,
    security,
    wait_for_secured_broker,
)

pytestmark = pytest.mark.timeout(300)

REAUTH_MS = 3000
INTERNAL_SHA256_REAUTH_MS = 5000  # the INTERNAL listener's override for SCRAM-SHA-256
PRODUCE_S = 10
TOPIC = "ticks"
QUIET = "quiet"  # never written: a Fetch there waits its max_wait_ms
USERS = ("alice", "carol", "dave", "erin", "grace")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    cluster = secure_cluster(
        zookeeper.port,
        tmp_path_factory.mktemp("secure-reauth"),
        1,
        pki,
        settings={
            "connections.max.reauth.ms": str(REAUTH_MS),
            "listener.name.internal.scram-sha-256.connections.max.reauth.ms": str(
                INTERNAL_SHA256_REAUTH_MS
            ),
        },
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
    """The broker up; the admin, and the users, each allowed to use both topics."""
    as_broker = await wait_for_secured_broker(cluster, pki)
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=as_broker) as admin:
        await upsert_user(admin, "admin", ADMIN_PASSWORD)
        for user in USERS:
            await upsert_user(admin, user, f"{user}-secret")
        for topic in (TOPIC, QUIET):
            await admin.create_topic(topic, partitions=1, replication_factor=1)
        await create_acls(
            admin,
            [
                Acl("TOPIC", topic, "LITERAL", f"User:{user}", "*", operation, "ALLOW")
                for user in USERS
                for topic in (TOPIC, QUIET)
                for operation in ("WRITE", "READ", "DESCRIBE")
            ],
        )
    port = cluster.brokers[1].port_of("EXTERNAL")

    async def logged_in() -> bool:
        for user in USERS:
            if await fetch_metadata(port, security=_as(pki, user)) is None:
                return False
        return True

    await eventually(logged_in, 30, "the users' credentials on the broker")


def _as(pki: Pki, user: str, password: str | None = None, **kwargs: Any) -> ClientSecurity:
    return security(pki, user, password or f"{user}-secret", **kwargs)


_EXPIRED = "closing connection: authentication session expired"


def _events(broker: BrokerProcess, event: str, since: int, user: str) -> list[dict[str, Any]]:
    return logged_events(broker, event, since=since, principal=f"User:{user}")


class _RawConnection:
    """A SASL_PLAINTEXT connection driven by hand: it authenticates only when told to."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.protocol = ClientProtocol("raw")

    async def request(self, body: object) -> Any:
        """The response; EOFError if the broker closed the connection."""
        _, data = self.protocol.send_request(body, None)
        await self.stream.send_all(data)
        while (response := self.protocol.next_response()) is NEED_DATA:
            received = await self.stream.receive_some(65536)
            if not received:
                raise EOFError("closed by the broker")
            self.protocol.receive_data(received)
        assert isinstance(response, ReceivedResponse)
        return response.body

    async def login(self, as_user: ClientSecurity) -> int:
        """The SASL exchange; the session lifetime the broker gave, in ms."""
        exchange = as_user.sasl_exchange()
        request = next(exchange)
        while True:
            response = await self.request(request)
            try:
                request = exchange.send(response)
            except StopIteration as done:
                return int(done.value)

    async def closed_by_broker(self) -> bool:
        """Waits for the broker to close the connection (nothing is sent meanwhile)."""
        return await self.stream.receive_some(1) == b""


async def _raw(
    cluster: Cluster, pki: Pki, user: str, mechanism: str = "SCRAM-SHA-512"
) -> tuple[_RawConnection, int]:
    port = cluster.brokers[1].port_of("INTERNAL")
    raw = _RawConnection(await trio.open_tcp_stream("127.0.0.1", port))
    lifetime_ms = await raw.login(_as(pki, user, protocol="SASL_PLAINTEXT", mechanism=mechanism))
    return raw, lifetime_ms


async def test_the_session_lifetime_is_the_listeners_for_the_mechanism(
    cluster: Cluster, pki: Pki
) -> None:
    """listener.name.internal.scram-sha-256.connections.max.reauth.ms overrides the
    broker-wide connections.max.reauth.ms for that listener and mechanism only."""
    for mechanism, expected_ms in [
        ("SCRAM-SHA-256", INTERNAL_SHA256_REAUTH_MS),
        ("SCRAM-SHA-512", REAUTH_MS),
    ]:
        raw, lifetime_ms = await _raw(cluster, pki, "erin", mechanism)
        await raw.stream.aclose()
        assert lifetime_ms == expected_ms, mechanism


async def test_a_producer_outlives_several_sessions_without_a_reconnect(
    cluster: Cluster, pki: Pki
) -> None:
    broker = cluster.brokers[1]
    mark = len(broker.log_text())
    notices: list[RetryNotice] = []
    offsets = []
    async with Producer(
        cluster.bootstrap_on("EXTERNAL"),
        security=_as(pki, "carol"),
        acks="all",
        on_retry=notices.append,
        delivery_timeout_ms=30_000,
    ) as producer:
        first = await producer.send(TOPIC, b"first")
        offsets.append((await first.wait()).offset)
        connected = len(_events(broker, "authenticated", mark, "carol"))
        end = trio.current_time() + PRODUCE_S
        while trio.current_time() < end:
            future = await producer.send(TOPIC, b"tick")
            offsets.append((await future.wait()).offset)  # acknowledged, one at a time
    assert notices == []  # no retry: no request failed, no connection broke
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    # The producer's connections were opened before the loop, and only re-authenticated after.
    assert len(_events(broker, "authenticated", mark, "carol")) == connected
    assert len(_events(broker, "re-authenticated", mark, "carol")) >= 3
    assert _events(broker, _EXPIRED, mark, "carol") == []


def test_the_blocking_connection_reauthenticates_too(cluster: Cluster, pki: Pki) -> None:
    broker = cluster.brokers[1]
    mark = len(broker.log_text())
    connection = connect_sync(
        "127.0.0.1", broker.port_of("EXTERNAL"), security=_as(pki, "dave"), timeout_ms=10_000
    )
    # A consumer's long polls: each Fetch of the empty topic waits its 300 ms.
    fetch = FetchRequest(
        -1, 300, 1, 1 << 20, (FetchTopic(QUIET, (FetchPartition(0, 0, 1 << 20),)),)
    )
    answered = 0
    try:
        stop = time.monotonic() + 3 * REAUTH_MS / 1000
        while time.monotonic() < stop:
            response: FetchResponse = connection.request(fetch, timeout_ms=5000)
            assert response.responses[0].partitions[0].error_code == ErrorCode.NONE, response
            answered += 1
    finally:
        connection.close()
    assert answered > 0
    assert len(_events(broker, "authenticated", mark, "dave")) == 1
    assert len(_events(broker, "re-authenticated", mark, "dave")) >= 2
    assert _events(broker, _EXPIRED, mark, "dave") == []


async def test_a_connection_that_does_not_reauthenticate_is_closed_after_its_lifetime(
    cluster: Cluster, pki: Pki
) -> None:
    before = trio.current_time()
    raw, lifetime_ms = await _raw(cluster, pki, "erin")
    authenticated_at = trio.current_time()
    assert lifetime_ms == REAUTH_MS  # SaslAuthenticate said so
    answered_until = authenticated_at
    with trio.fail_after(REAUTH_MS / 1000 + 15):
        while True:
            try:
                assert (await raw.request(MetadataRequest(None))).brokers
            except (EOFError, trio.BrokenResourceError):
                break
            answered_until = trio.current_time()
    closed_at = trio.current_time()
    # Requests went out back to back, so the first refused one came just after the close:
    # the session began after `before`, so it was not cut short. The last answer came within
    # a (slow) round trip of the end.
    assert closed_at - before >= REAUTH_MS / 1000
    assert answered_until - authenticated_at >= REAUTH_MS / 1000 - 1
    assert len(_events(cluster.brokers[1], _EXPIRED, 0, "erin")) >= 1


async def test_reauthenticating_as_another_user_closes_the_connection(
    cluster: Cluster, pki: Pki
) -> None:
    raw, _ = await _raw(cluster, pki, "erin")
    with pytest.raises(AuthenticationError, match="Cannot change principals") as refused:
        await raw.login(_as(pki, "grace", protocol="SASL_PLAINTEXT"))
    assert refused.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    with trio.fail_after(10):
        assert await raw.closed_by_broker()


async def _highwater(pki: Pki, cluster: Cluster, tmp_path: Path, *args: str) -> str:
    """`highwater ARGS` as the admin (a client properties file); its stderr."""
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username=admin\nsasl.password={ADMIN_PASSWORD}\n"
        f"ssl.truststore.location={pki.ca}\n"
    )
    env = {
        **os.environ,
        "HIGHWATER_BOOTSTRAP": cluster.bootstrap_on("EXTERNAL"),
        "HIGHWATER_COMMAND_CONFIG": str(properties),
    }
    done = await trio.run_process(
        [sys.executable, "-m", "client.cli", *args],
        env=env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stderr.decode()


async def test_deleting_a_user_closes_the_users_connections(
    cluster: Cluster, pki: Pki, tmp_path: Path
) -> None:
    raw, _ = await _raw(cluster, pki, "alice")
    async with Producer(
        cluster.bootstrap_on("EXTERNAL"),
        security=_as(pki, "alice"),
        acks="all",
        delivery_timeout_ms=120_000,
        max_block_ms=5_000,
    ) as producer:
        assert (await (await producer.send(TOPIC, b"before")).wait()).offset >= 0
        mark = len(cluster.brokers[1].log_text())
        await _highwater(pki, cluster, tmp_path, "users", "delete", "alice")
        with trio.fail_after(15):
            assert await raw.closed_by_broker()
        closed = logged_events(
            cluster.brokers[1],
            "closing connection: the user's credentials were deleted or changed",
            since=mark,
            principal="User:alice",
        )
        assert len(closed) >= 2  # the raw connection and the producer's
        # The producer's reconnect is refused: its send fails, saying why, at once rather
        # than at delivery.timeout.ms (KIP-152).
        future = await producer.send(TOPIC, b"after")
        with pytest.raises(HighwaterClientError, match="SASL_AUTHENTICATION_FAILED"):
            with trio.fail_after(30):
                await future.wait()
    with pytest.raises(AuthenticationFailedError, match="SASL_AUTHENTICATION_FAILED") as refused:
        await connect(
            "127.0.0.1", cluster.brokers[1].port_of("EXTERNAL"), security=_as(pki, "alice")
        )
    assert "invalid credentials" in str(refused.value)


async def test_a_changed_password_closes_the_users_connections(cluster: Cluster, pki: Pki) -> None:
    raw, _ = await _raw(cluster, pki, "grace")
    async with Admin(
        cluster.bootstrap_on("EXTERNAL"), security=_as(pki, "admin", ADMIN_PASSWORD)
    ) as admin:
        await upsert_user(admin, "grace", "grace-new-secret")
    with trio.fail_after(15):
        assert await raw.closed_by_broker()
    port = cluster.brokers[1].port_of("EXTERNAL")
    with pytest.raises(AuthenticationFailedError, match="SASL_AUTHENTICATION_FAILED"):
        await connect("127.0.0.1", port, security=_as(pki, "grace"))
    assert await fetch_metadata(port, security=_as(pki, "grace", "grace-new-secret")) is not None
