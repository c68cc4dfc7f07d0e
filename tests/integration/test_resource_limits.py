"""Resource limits against a real broker process: many idle connections, clients that send
half a frame and stall, a client that pipelines requests and never reads the responses. The
broker's memory stays bounded (VmRSS of its process, from /proc), it keeps serving other
clients quickly, and it frees every connection's file descriptor once the client goes.

How long the broker waits before it closes a stalled or non-reading client is shown on an
in-process broker whose timeouts are shortened (the real ones are 600 s and 30 s, too long
for a test).
docs/reliability.md names each limit.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import struct
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Final

import pytest
import trio

import broker.connection_task
import broker.server
from broker.config.broker_config import load_config
from broker.context import BrokerContext
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager
from broker.server import BrokerServer
from client.cli.zookeeper_server import ZooKeeperServer, port_accepts
from client.network import connect
from protocol.apis import supported_versions
from protocol.codec import decode_response, encode_response
from protocol.errors import ErrorCode
from protocol.framing import DIRECT_FRAME_BYTES, NEED_DATA, FrameDecoder
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import Record, build_batch, decode_batches
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, wait_until
from tests.integration.fuzz_frames import request_frame
from tests.integration.replication_checks import create_topic, prepare_cluster, produce

pytestmark = [pytest.mark.integration]

TOPIC: Final = "limits"
RECORD_BYTES: Final = 256 * 1024
RECORDS: Final = 16  # 4 MiB stored: a Fetch of 1 MiB always finds a full answer
IDLE_CONNECTIONS: Final = 500
SERVED_WITHIN_S: Final = 2.0  # a normal client's Metadata + Produce + Fetch, end to end
RSS_SLACK_KIB: Final = 64 * 1024
MIB: Final = 1024 * 1024


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def pid_of(broker: BrokerProcess) -> int:
    assert broker.process is not None and broker.running, "the broker runs"
    return broker.process.pid


@contextmanager
def lone_broker(
    zookeeper_port: int,
    directory: Path,
    overrides: Mapping[str, str] | None = None,
    listeners: dict[str, str] | None = None,
) -> Iterator[Cluster]:
    """A 1-broker cluster (`listeners`: name -> security protocol, the first the inter-broker
    one); fails fast if the broker exits at start (e.g. on a setting it does not know)."""
    cluster = Cluster(zookeeper_port, directory, 1, dict(overrides or {}), listeners=listeners)
    cluster.start()
    broker_process = cluster.brokers[1]
    try:
        wait_until(
            lambda: not broker_process.running or port_accepts("127.0.0.1", broker_process.port),
            30,
            "the broker to listen (or exit)",
        )
        assert broker_process.running, (
            f"the broker exited at start:\n{broker_process.log_text()[-1500:]}"
        )
        prepare_cluster(cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def limits_broker(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    with lone_broker(zookeeper.port, tmp_path_factory.mktemp("limits")) as cluster:
        trio.run(_fill, cluster)
        yield cluster.brokers[1]


async def _fill(cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, [[1]])
    await produce(cluster, TOPIC, 0, [bytes([i]) * RECORD_BYTES for i in range(RECORDS)])


def _fetch(max_bytes: int = MIB) -> FetchRequest:
    wanted = FetchPartition(0, 0, max_bytes)
    return FetchRequest(-1, 0, 0, max_bytes, (FetchTopic(TOPIC, (wanted,)),))


async def served(port: int) -> float:
    """A fresh client: Metadata, a Produce (acks=1) and a Fetch, answered; the seconds it
    took."""
    started = trio.current_time()
    with trio.fail_after(10):
        conn = await connect("127.0.0.1", port, client_id="bystander")
        try:
            await conn.request(MetadataRequest((TOPIC,)))
            batch = build_batch([Record(b"bystander")])
            data = (ProduceTopicData(TOPIC, (ProducePartitionData(0, batch),)),)
            produced: ProduceResponse = await conn.request(ProduceRequest(1, 5000, data))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            fetched: FetchResponse = await conn.request(_fetch(64 * 1024))
            assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE
        finally:
            await conn.aclose()
    return trio.current_time() - started


async def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    async def check() -> bool:
        return condition()

    await eventually(check, timeout_s, what)


async def closed_within(stream: trio.SocketStream, timeout_s: float) -> float | None:
    """Read (and drop) until the broker closes; the seconds that took, None if it did not
    within `timeout_s`."""
    started = trio.current_time()
    with trio.move_on_after(timeout_s):
        await drain(stream)
        return trio.current_time() - started
    return None


async def drain(stream: trio.SocketStream) -> int:
    """Read until the broker closes the connection (EOF or reset); the bytes read."""
    total = 0
    while True:
        try:
            chunk = await stream.receive_some(256 * 1024)
        except trio.BrokenResourceError:
            return total
        if not chunk:
            return total
        total += len(chunk)


async def settled_fds(pid: int) -> int:
    """The broker's open descriptors once the last client's socket is closed (the broker
    closes its side a moment after the client does)."""
    counts = [open_fds(pid)]
    with trio.move_on_after(5):
        while len(counts) < 3 or len(set(counts[-3:])) > 1:
            await trio.sleep(0.1)
            counts.append(open_fds(pid))
    return counts[-1]


def _fd_budget() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    # The broker inherits our limit; leave both processes room for their own files.
    return max(50, min(IDLE_CONNECTIONS, soft // 2 - 100))


# -- many idle connections ----------------------------------------------------------------


async def test_many_idle_connections_cost_little_and_others_are_served(
    limits_broker: BrokerProcess,
) -> None:
    pid, port = pid_of(limits_broker), limits_broker.port
    count = _fd_budget()
    await served(port)  # warm: the first client's allocations are not the idle ones'
    fds_before = await settled_fds(pid)
    rss_before = rss_kib(pid)
    idle: list[trio.SocketStream] = []
    try:
        for _ in range(count):
            idle.append(await trio.open_tcp_stream("127.0.0.1", port))
        await wait_for(lambda: open_fds(pid) >= fds_before + count, 10, "every accept")
        fds_held = open_fds(pid)
        latency = await served(port)
        rss_after = rss_kib(pid)
        # Every idle connection is still open and still works.
        for stream in idle[:: max(1, count // 10)]:
            await stream.send_all(request_frame(ApiVersionsRequest(), correlation_id=9))
            with trio.fail_after(5):
                assert await stream.receive_some(1 << 16)
    finally:
        for stream in idle:
            await stream.aclose()
    await wait_for(lambda: open_fds(pid) <= fds_before + 2, 10, "the broker to close them all")
    growth = rss_after - rss_before
    print(
        f"\n{count} idle connections: broker RSS {rss_before} -> {rss_after} KiB "
        f"(+{growth / count:.1f} KiB each), fds {fds_before} -> {fds_held} -> "
        f"{open_fds(pid)}; a fresh client served in {latency * 1000:.0f} ms"
    )
    assert latency < SERVED_WITHIN_S
    assert growth < RSS_SLACK_KIB, f"{count} idle connections grew the broker by {growth} KiB"


def unread_bytes(port: int) -> int:
    """Bytes that clients sent to the broker listening on `port` and it has not read yet: the
    receive queues of its accepted sockets (/proc/net/tcp, local port `port`)."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                if local_port == port and fields[3] == "01":  # ESTABLISHED
                    total += int(fields[4].split(":")[1], 16)  # tx_queue:rx_queue
    return total


async def test_a_declared_length_alone_sets_no_memory_aside(limits_broker: BrokerProcess) -> None:
    """100 connections each send a length prefix of 1 MiB and one byte of body, then stall:
    the broker reads them all and grows by far less than the 100 MiB declared (it used to
    make each frame's 1 MiB buffer at once); the frames' senders still get answers."""
    pid, port = pid_of(limits_broker), limits_broker.port
    count, declared = 100, MIB
    await served(port)  # warm
    fds_before = await settled_fds(pid)
    rss_before = rss_kib(pid)
    streams: list[trio.SocketStream] = []
    try:
        for _ in range(count):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            streams.append(stream)
            await stream.send_all(struct.pack(">i", declared) + b"\x00")
        await wait_for(lambda: open_fds(pid) >= fds_before + count, 10, "every accept")
        await wait_for(lambda: unread_bytes(port) == 0, 10, "the broker to read every prefix")
        rss_held = rss_kib(pid)
        latency = await served(port)
    finally:
        for stream in streams:
            await stream.aclose()
    growth_kib = rss_held - rss_before
    print(
        f"\n{count} connections x 5 bytes declaring {declared // MIB} MiB each: broker RSS "
        f"{rss_before // 1024} -> {rss_held // 1024} MiB (+{growth_kib / 1024:.1f} MiB); "
        f"others served in {latency * 1000:.0f} ms"
    )
    assert latency < SERVED_WITHIN_S
    assert growth_kib < 20 * 1024, f"{count} declared lengths grew the broker {growth_kib} KiB"


# -- connection limits: per address, per listener, the inter-broker exemption, the rate ----


async def answers(port: int, source: str = "127.0.0.1") -> trio.SocketStream | None:
    """A connection from `source` that the broker answers (ApiVersions), or None if the
    broker closes it instead."""
    stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=source)
    try:
        await stream.send_all(request_frame(ApiVersionsRequest(), correlation_id=3))
        decoder = FrameDecoder()
        with trio.fail_after(10):
            while decoder.next_frame() is NEED_DATA:
                chunk = await stream.receive_some(1 << 16)
                if not chunk:
                    break
                decoder.receive_data(chunk)
            else:
                return stream
    except (trio.BrokenResourceError, OSError):
        pass
    await stream.aclose()
    return None


def test_connection_caps_per_address_per_listener_and_the_inter_broker_exemption(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    """CLIENT and INTERNAL (the inter-broker listener) on one broker. 127.0.0.1 may hold 4
    connections (an override of max.connections.per.ip=3), 127.0.0.2 holds 3; the next from
    each is closed, while INTERNAL still accepts connections from 127.0.0.1 and past
    max.connections (KIP-402), up to its own listener.name.internal.max.connections."""
    overrides = {
        "max.connections": "12",
        "max.connections.per.ip": "3",
        "max.connections.per.ip.overrides": "127.0.0.1:4",
        "listener.name.internal.max.connections": "30",
    }
    listeners = {"INTERNAL": "PLAINTEXT", "CLIENT": "PLAINTEXT"}
    with lone_broker(zookeeper.port, tmp_path, overrides, listeners) as cluster:
        broker_process = cluster.brokers[1]
        client, internal = broker_process.port_of("CLIENT"), broker_process.port_of("INTERNAL")

        async def crowd() -> dict[str, list[bool]]:
            held: list[trio.SocketStream] = []

            async def attempt(port: int, source: str) -> bool:
                stream = await answers(port, source)
                if stream is not None:
                    held.append(stream)
                return stream is not None

            outcome: dict[str, list[bool]] = {}
            try:
                outcome["client 127.0.0.1"] = [await attempt(client, "127.0.0.1") for _ in range(5)]
                outcome["client 127.0.0.2"] = [await attempt(client, "127.0.0.2") for _ in range(4)]
                outcome["internal"] = [await attempt(internal, "127.0.0.1") for _ in range(15)]
                # 7 client and 15+ inter-broker connections: past max.connections for clients
                outcome["client past max.connections"] = [await attempt(client, "127.0.0.3")]
                outcome["internal to its limit"] = [
                    await attempt(internal, "127.0.0.1") for _ in range(20)
                ]
            finally:
                for stream in held:
                    await stream.aclose()
            return outcome

        outcome = trio.run(crowd)
        log = broker_process.log_text()
    print(f"\n{outcome}")
    assert outcome["client 127.0.0.1"] == [True] * 4 + [False]
    assert outcome["client 127.0.0.2"] == [True] * 3 + [False]
    assert outcome["internal"] == [True] * 15  # neither per-address nor max.connections
    assert outcome["client past max.connections"] == [False]
    admitted = outcome["internal to its limit"]
    # 30 on INTERNAL in all, the broker's own (controller) connections among them.
    assert 0 < admitted.count(True) <= 15 and admitted[-1] is False
    assert "max.connections.per.ip reached" in log
    assert "the listener's max.connections reached" in log


def test_max_connection_creation_rate_delays_accepts_but_not_the_inter_broker_listener(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    """max.connection.creation.rate=5: 20 new client connections are all answered, but the
    broker takes them at about 5 a second (KIP-612), while a connection to the inter-broker
    listener meanwhile is answered at once."""
    overrides = {"max.connection.creation.rate": "5"}
    listeners = {"INTERNAL": "PLAINTEXT", "CLIENT": "PLAINTEXT"}
    with lone_broker(zookeeper.port, tmp_path, overrides, listeners) as cluster:
        broker_process = cluster.brokers[1]
        client, internal = broker_process.port_of("CLIENT"), broker_process.port_of("INTERNAL")

        async def burst() -> tuple[float, float, int]:
            held: list[trio.SocketStream] = []
            internal_s = 0.0

            async def one() -> None:
                stream = await answers(client)
                if stream is not None:
                    held.append(stream)

            started = trio.current_time()
            try:
                async with trio.open_nursery() as nursery:
                    for _ in range(20):
                        nursery.start_soon(one)
                    # Five (the bucket) answered at once; the rest wait: throttled now.
                    await wait_for(lambda: len(held) >= 5, 10, "the first five answered")
                    asked = trio.current_time()
                    stream = await answers(internal)
                    internal_s = trio.current_time() - asked
                    assert stream is not None
                    held.append(stream)
                took = trio.current_time() - started
            finally:
                for stream in held:
                    await stream.aclose()
            return took, internal_s, len(held) - 1

        took, internal_s, answered = trio.run(burst)
    print(
        f"\n20 connections at max.connection.creation.rate=5: all answered in {took:.2f} s; "
        f"the inter-broker listener answered in {internal_s * 1000:.0f} ms meanwhile"
    )
    assert answered == 20
    assert took >= 2.0, "20 connections at 5/s (a bucket of 5) took less than 3 s"
    assert internal_s < 1.0


# -- half a frame, then nothing -----------------------------------------------------------


async def test_half_a_frame_then_a_stall_blocks_no_one(limits_broker: BrokerProcess) -> None:
    """The stalled client is neither answered nor dropped (the idle timeout, 600 s, is far);
    everyone else is served meanwhile; when the rest of the frame comes, it is answered."""
    port = limits_broker.port
    whole = request_frame(ApiVersionsRequest(), correlation_id=11)
    async with await trio.open_tcp_stream("127.0.0.1", port) as staller:
        await staller.send_all(whole[:7])  # the length prefix and 3 bytes of the body
        latencies = [await served(port) for _ in range(3)]
        assert await closed_within(staller, 2.0) is None, "the broker dropped a stalled client"
        await staller.send_all(whole[7:])
        with trio.fail_after(5):
            answer = await staller.receive_some(1 << 16)
    decoder = FrameDecoder()
    decoder.receive_data(answer)
    body = decoder.next_frame()
    assert body is not NEED_DATA and isinstance(body, bytes)
    assert decode_response(body, 18, 0).header.correlation_id == 11
    print(f"\nhalf a frame, stalled: others served in {max(latencies) * 1000:.0f} ms at most")
    assert max(latencies) < SERVED_WITHIN_S


async def test_a_large_request_in_pieces_is_answered_and_its_records_kept_whole(
    limits_broker: BrokerProcess,
) -> None:
    """A Produce frame of about 600 KiB, which the broker reads straight into its own buffer
    (docs/performance.md, "Reading large frames"), sent in pieces with others served between
    them: when the last piece comes it is answered, and its records read back whole."""
    port = limits_broker.port
    values = [bytes([0xA0 + i]) * (200 * 1024) for i in range(3)]
    batch = build_batch([Record(value) for value in values])
    data = (ProduceTopicData(TOPIC, (ProducePartitionData(0, batch),)),)
    whole = request_frame(ProduceRequest(1, 5000, data), correlation_id=21)
    assert DIRECT_FRAME_BYTES < len(whole) <= broker.connection_task.DIRECT_REQUEST_MAX_BYTES
    cuts = [0, 3, 1000, len(whole) // 2, len(whole)]
    async with await trio.open_tcp_stream("127.0.0.1", port) as client:
        for start, end in itertools.pairwise(cuts):
            await client.send_all(whole[start:end])
            if end < len(whole):
                assert await served(port) < SERVED_WITHIN_S
        decoder = FrameDecoder()
        with trio.fail_after(10):
            while (body := decoder.next_frame()) is NEED_DATA:
                decoder.receive_data(await client.receive_some(1 << 16))
    assert isinstance(body, bytes)
    answer = decode_response(body, 0, 0)
    assert answer.header.correlation_id == 21
    assert isinstance(answer.body, ProduceResponse)
    produced = answer.body.responses[0].partition_responses[0]
    assert produced.error_code == ErrorCode.NONE
    conn = await connect("127.0.0.1", port, client_id="reader")
    try:
        wanted = FetchPartition(0, produced.base_offset, 4 * MIB)
        request = FetchRequest(-1, 0, 0, 4 * MIB, (FetchTopic(TOPIC, (wanted,)),))
        fetched: FetchResponse = await conn.request(request)
    finally:
        await conn.aclose()
    records = [
        r for b in decode_batches(fetched.responses[0].partitions[0].records) for r in b.records
    ]
    assert [r.value for r in records[:3]] == values


async def test_stalled_partial_frames_hold_at_most_what_was_sent(
    limits_broker: BrokerProcess,
) -> None:
    """A partial frame is buffered as it arrives, up to its declared length; a length over
    socket.request.max.bytes (100 MiB) is refused before any buffer is allocated."""
    pid, port = pid_of(limits_broker), limits_broker.port
    stallers, declared, sent = 10, 8 * MIB, 2 * MIB
    rss_before = rss_kib(pid)
    streams = []
    try:
        for _ in range(stallers):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            streams.append(stream)
            await stream.send_all(struct.pack(">i", declared) + b"\x00" * sent)
        await trio.sleep(0.5)  # let the broker read it all
        rss_held = rss_kib(pid)
        latency = await served(port)
        async with await trio.open_tcp_stream("127.0.0.1", port) as greedy:
            await greedy.send_all(struct.pack(">i", 100 * MIB + 1))
            refused_s = await closed_within(greedy, 5.0)
    finally:
        for stream in streams:
            await stream.aclose()
    held = rss_held - rss_before
    print(
        f"\n{stallers} stalled frames of {declared // MIB} MiB with {sent // MIB} MiB sent: "
        f"broker RSS +{held // 1024} MiB; a 100 MiB + 1 length closed in "
        f"{(refused_s or 0) * 1000:.0f} ms; others served in {latency * 1000:.0f} ms"
    )
    assert refused_s is not None, "a length over socket.request.max.bytes was not refused"
    assert latency < SERVED_WITHIN_S
    assert held < stallers * (sent // 1024) + RSS_SLACK_KIB


# -- a client that never reads ------------------------------------------------------------


async def test_a_client_that_never_reads_costs_one_response(
    limits_broker: BrokerProcess,
) -> None:
    """2000 pipelined Fetches of 1 MiB each, never read: the broker answers one request at a
    time and reads the next only when its answer is written, so it holds about one response
    (plus the kernel's socket buffers) and serves everyone else."""
    pid, port = pid_of(limits_broker), limits_broker.port
    requests = b"".join(
        request_frame(_fetch(), correlation_id=i) for i in range(2000)
    )  # 2 GB of answers if read
    rss_before = rss_kib(pid)
    peak = rss_before
    async with await trio.open_tcp_stream("127.0.0.1", port) as hog, trio.open_nursery() as n:
        n.start_soon(hog.send_all, requests)  # blocks once the broker stops reading
        latencies = []
        for _ in range(8):
            await trio.sleep(0.25)
            peak = max(peak, rss_kib(pid))
            latencies.append(await served(port))
        n.cancel_scope.cancel()
    growth = peak - rss_before
    print(
        f"\na client pipelining 2000 Fetches of 1 MiB, never reading: broker RSS "
        f"+{growth // 1024} MiB at most over 2 s; others served in "
        f"{max(latencies) * 1000:.0f} ms at most"
    )
    assert max(latencies) < SERVED_WITHIN_S
    assert growth < RSS_SLACK_KIB, f"the broker grew by {growth} KiB for one non-reader"


# -- when the broker lets go: an in-process broker with short timeouts --------------------


@asynccontextmanager
async def quick_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, idle_s: float, send_s: float
) -> AsyncIterator[int]:
    """An in-process broker (no ZooKeeper, no partitions) whose idle timeout
    (broker/server.py IDLE_TIMEOUT_S) and response send timeout (broker/connection_task.py
    `_send_timeout_s`) are `idle_s` and `send_s`; yields its port."""
    monkeypatch.setattr(broker.server, "IDLE_TIMEOUT_S", idle_s)
    monkeypatch.setattr(broker.connection_task, "_send_timeout_s", lambda size: send_s)
    config = load_config(
        None, ["broker.id=1", "zookeeper.connect=127.0.0.1:1", f"log.dirs={tmp_path}"]
    )
    log_manager = LogManager([tmp_path], config.log_config())
    log_manager.startup(0)
    server = BrokerServer(
        BrokerContext(config, ReplicaManager(1, log_manager)),
        "127.0.0.1",
        0,
        config.socket_request_max_bytes,
    )
    try:
        async with trio.open_nursery() as nursery:
            yield await nursery.start(server.run)
            nursery.cancel_scope.cancel()
    finally:
        log_manager.shutdown(0)


async def test_stalled_half_frame_is_closed_after_the_idle_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with quick_broker(tmp_path, monkeypatch, idle_s=1.0, send_s=30) as port:
        whole = request_frame(ApiVersionsRequest())
        async with await trio.open_tcp_stream("127.0.0.1", port) as staller:
            await staller.send_all(whole[:7])
            closed_s = await closed_within(staller, 5.0)
        async with await trio.open_tcp_stream("127.0.0.1", port) as trickler:
            # A byte now and then resets the idle clock: the frame never ends, nor does this.
            for byte in whole[:25]:
                await trickler.send_all(bytes([byte]))
                await trio.sleep(0.1)
            trickled = await closed_within(trickler, 0.2)
    print(f"\nidle timeout 1 s: a stalled half frame closed after {closed_s or 0:.2f} s")
    assert closed_s is not None and 0.9 < closed_s < 3.0
    assert trickled is None, "a byte every 0.1 s keeps a half frame open past the timeout"


async def test_a_client_that_never_reads_is_closed_after_the_send_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100000 pipelined ApiVersions requests (~50 MB of answers), never read."""
    count = 100_000
    requests = b"".join(request_frame(ApiVersionsRequest(), correlation_id=i) for i in range(count))
    async with quick_broker(tmp_path, monkeypatch, idle_s=600, send_s=0.5) as port:
        hog = await trio.open_tcp_stream("127.0.0.1", port)
        async with hog:
            with trio.move_on_after(3), contextlib.suppress(trio.BrokenResourceError):
                await hog.send_all(requests)  # blocks once the broker stops reading
            await trio.sleep(1)  # it is blocked writing to us, its timer runs out
            with trio.fail_after(5):
                received = await drain(hog)
    answer_bytes = len(_api_versions_answer())
    print(
        f"\nsend timeout 0.5 s: a client that never read was closed after "
        f"{received // answer_bytes} of {count} answers"
    )
    assert received < count * answer_bytes, "the broker kept a client that never reads"


def _api_versions_answer() -> bytes:
    return encode_response(1, 18, 0, ApiVersionsResponse(ErrorCode.NONE, supported_versions()))


# -- settings the issue needs and the broker lacks ----------------------------------------


def test_connections_max_idle_ms_closes_a_stalled_half_frame(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    overrides = {"connections.max.idle.ms": "1000"}
    with lone_broker(zookeeper.port, tmp_path, overrides) as cluster:

        async def stall() -> float | None:
            whole = request_frame(ApiVersionsRequest())
            async with await trio.open_tcp_stream("127.0.0.1", cluster.brokers[1].port) as s:
                await s.send_all(whole[:7])
                return await closed_within(s, 5.0)

        closed_s = trio.run(stall)
    assert closed_s is not None and closed_s < 3


def test_max_connections_caps_what_one_client_can_hold(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    with lone_broker(zookeeper.port, tmp_path, {"max.connections": "20"}) as cluster:
        port = cluster.brokers[1].port

        async def crowd() -> int:
            streams = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(40)]
            closed = 0
            for stream in streams:
                closed += await closed_within(stream, 0.05) is not None
            for stream in streams:
                await stream.aclose()
            return closed

        closed = trio.run(crowd)
    assert closed >= 20, f"only {closed} of 40 connections over max.connections=20 closed"


def test_idle_connections_that_use_up_file_descriptors_do_not_stop_the_broker(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    overrides = {"replica.high.watermark.checkpoint.interval.ms": "500"}
    with lone_broker(zookeeper.port, tmp_path, overrides) as cluster:
        trio.run(_fill, cluster)  # the topic `served` produces to
        broker_process = cluster.brokers[1]
        pid = pid_of(broker_process)
        limit = open_fds(pid) + 64
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))

        async def crowd() -> None:
            streams = [
                await trio.open_tcp_stream("127.0.0.1", broker_process.port)
                for _ in range(limit + 20)
            ]
            await trio.sleep(2)  # a few checkpoint intervals with no descriptor to spare
            for stream in streams:
                await stream.aclose()

        trio.run(crowd)
        assert broker_process.running, f"the broker exited: {broker_process.log_text()[-300:]}"
        assert trio.run(served, broker_process.port) < SERVED_WITHIN_S
