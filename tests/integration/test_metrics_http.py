"""Bad input to the metrics listener never affects the Kafka listener or the broker's health.

One real broker (and ZooKeeper) with a metrics listener and small HTTP limits. Against it:
unknown paths and methods, a huge request head, slowloris clients holding every HTTP
connection slot, a flood beyond the connection limit, garbage bytes, and clients that never
read their answer. Throughout, a Kafka-protocol client keeps getting Metadata answers, their
median within 10 times the median measured just before without the abuse, and afterwards
/metrics answers again.
"""

from __future__ import annotations

import contextlib
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from client.network import connect
from protocol.messages.metadata import MetadataRequest
from tests.integration.cluster_harness import Cluster, wait_until
from tests.integration.metrics_checks import metrics_port, scrape, value
from tests.integration.replication_checks import prepare_cluster

pytestmark = [pytest.mark.integration]

MAX_CONNECTIONS = 8
READ_TIMEOUT_MS = 2000


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    overrides = {
        "metrics.listener": f"http://127.0.0.1:{free_port()}",
        "metrics.max.connections": str(MAX_CONNECTIONS),
        "metrics.read.timeout.ms": str(READ_TIMEOUT_MS),
    }
    cluster = Cluster(zookeeper.port, tmp_path_factory.mktemp("http"), 1, overrides)
    cluster.start()
    try:
        prepare_cluster(cluster, timeout_s=60)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def http_port(cluster: Cluster) -> int:
    return metrics_port(cluster.brokers[1])


def get(cluster: Cluster, path: str, method: str = "GET") -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{http_port(cluster)}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0  # refused or reset: over the connection limit


async def kafka_latencies(cluster: Cluster, duration_s: float) -> list[float]:
    """Metadata round trips on the Kafka listener, one every 50 ms for `duration_s` seconds;
    each must be answered (within its 5 s timeout)."""
    broker = cluster.brokers[1]
    conn = await connect(broker.host, broker.port)
    out: list[float] = []
    try:
        end = trio.current_time() + duration_s
        while trio.current_time() < end:
            started = trio.current_time()
            response = await conn.request(MetadataRequest(None), timeout_ms=5000)
            assert [b.node_id for b in response.brokers] == [1]
            out.append(trio.current_time() - started)
            await trio.sleep(0.05)  # a pace, not a synchronisation
    finally:
        await conn.aclose()
    return out


def assert_not_slowed(quiet: list[float], abused: list[float]) -> None:
    """The Kafka listener's round trips under HTTP abuse against the same broker's without,
    measured just before in the same run (no fixed time bound: the machine is shared). The
    median shows a broker slowed throughout, the 90th percentile one stalled now and then
    (an event loop blocked by HTTP work)."""
    for name, q in (("median", 0.5), ("p90", 0.9)):
        quiet_s, abused_s = _quantile(quiet, q), _quantile(abused, q)
        print(
            f"Metadata round trip {name}: {quiet_s * 1e3:.2f} ms quiet, {abused_s * 1e3:.2f} abused"
        )
        assert abused_s <= 10 * quiet_s, (name, quiet_s, abused_s)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_unknown_paths_and_methods_are_refused(cluster: Cluster) -> None:
    assert get(cluster, "/metrics") == 200
    assert get(cluster, "/") == 200
    assert get(cluster, "/api/cluster") == 200
    assert get(cluster, "/no/such/page") == 404
    assert get(cluster, "/../../etc/passwd") == 404
    assert get(cluster, "/metrics", method="POST") == 405
    assert get(cluster, "/metrics", method="DELETE") == 405


def test_a_huge_request_head_is_refused(cluster: Cluster) -> None:
    with socket.create_connection(("127.0.0.1", http_port(cluster)), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        answer = _read_some(sock)
    assert answer == b"" or answer.split(b" ")[1] in (b"400", b"431"), answer[:80]
    assert get(cluster, "/metrics") == 200


def test_garbage_bytes_close_the_connection(cluster: Cluster) -> None:
    with socket.create_connection(("127.0.0.1", http_port(cluster)), timeout=5) as sock:
        sock.sendall(b"\x00\xff" * 1000 + b"\r\n\r\n")
        answer = _read_some(sock)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400"), answer[:80]


async def test_slow_clients_and_a_flood_never_touch_the_kafka_listener(cluster: Cluster) -> None:
    port = http_port(cluster)
    before = scrape(cluster.brokers[1])
    assert before is not None
    quiet = await kafka_latencies(cluster, 2.0)
    # Slowloris: every slot taken by a client that sends its head a byte at a time, plus
    # a flood twice the limit of clients that send nothing, plus clients that ask for the page
    # and never read.
    socks: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS * 3):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            socks.append(sock)

        async def dribble() -> None:
            for _ in range(10):
                for sock in socks:
                    with contextlib.suppress(OSError):  # closed by the broker: as wanted
                        sock.send(b"X")
                await trio.sleep(0.3)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dribble)
            abused = await kafka_latencies(cluster, 3.0)
        assert_not_slowed(quiet, abused)
        # Beyond the limit, connections were closed at once.
        closed = sum(1 for sock in socks if _closed(sock))
        assert closed >= MAX_CONNECTIONS * 2 - 1
    finally:
        for sock in socks:
            sock.close()
    # The slow ones are dropped after the read timeout; then the listener serves again.
    after = wait_until(
        lambda: scrape(cluster.brokers[1]), READ_TIMEOUT_MS / 1000 + 10, "/metrics again"
    )
    refused = value(after, "highwater_http_connections_closed_by_limit_total")
    assert refused >= MAX_CONNECTIONS * 2 - 1
    assert value(after, "highwater_zookeeper_session_state", state="connected") == 1


async def test_clients_that_never_read_do_not_stall_the_broker(cluster: Cluster) -> None:
    port = http_port(cluster)
    quiet = await kafka_latencies(cluster, 2.0)
    socks = []
    try:
        for _ in range(MAX_CONNECTIONS - 2):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            # Pipelined requests for the page and the JSON, answers never read.
            sock.sendall(b"GET /api/cluster HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
            socks.append(sock)
        abused = await kafka_latencies(cluster, 2.0)
        assert_not_slowed(quiet, abused)
        # A free slot still serves a scrape (within get()'s 5 s timeout).
        assert get(cluster, "/metrics") == 200
    finally:
        for sock in socks:
            sock.close()


def _read_some(sock: socket.socket) -> bytes:
    try:
        return sock.recv(4096)
    except (ConnectionResetError, TimeoutError):
        return b""


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(0.2)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (TimeoutError, BlockingIOError):
        return False
