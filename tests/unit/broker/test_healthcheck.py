"""broker.healthcheck against a stub broker that answers Metadata (a thread, plain sockets)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.broker_config import load_config
from broker.healthcheck import (
    BrokerArgs,
    Unhealthy,
    broker_args_from_cmdline,
    check,
    find_broker_args,
    main,
)
from protocol.codec import decode_request, encode_response
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages.common import BrokerEndpoint
from protocol.messages.metadata import MetadataRequest, MetadataResponse


class StubBroker:
    """Answers every Metadata request with `self.response` (set by the test)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.response = MetadataResponse(brokers=(), cluster_id="c", controller_id=-1, topics=())
        self.requests: list[object] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                decoder = FrameDecoder()
                while data := conn.recv(65536):
                    decoder.receive_data(data)
                    while (body := decoder.next_frame()) is not NEED_DATA:
                        assert isinstance(body, bytes)
                        request = decode_request(body)
                        self.requests.append(request.body)
                        h = request.header
                        conn.sendall(
                            encode_response(
                                h.correlation_id, h.api_key, h.api_version, self.response
                            )
                        )

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def stub() -> Iterator[StubBroker]:
    broker = StubBroker()
    yield broker
    broker.close()


def _config(port: int, broker_id: int = 1) -> object:
    return load_config(
        None,
        [
            f"broker.id={broker_id}",
            f"listeners=PLAINTEXT://0.0.0.0:{port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "zookeeper.connect=zookeeper:2181",
        ],
    )


def _registered(port: int, *ids: int, controller: int = 1) -> MetadataResponse:
    return MetadataResponse(
        brokers=tuple(BrokerEndpoint(i, "127.0.0.1", port if i == 1 else 1000 + i) for i in ids),
        cluster_id="c",
        controller_id=controller,
        topics=(),
    )


def test_healthy_when_registered_at_its_advertised_address(stub: StubBroker) -> None:
    stub.response = _registered(stub.port, 1, 2, 3, controller=2)
    summary = check(_config(stub.port))  # type: ignore[arg-type]
    assert summary == f"broker 1 serving at 127.0.0.1:{stub.port}: 3 live brokers, controller 2"
    # Its own listener, then its advertised address; never a topic listing.
    assert stub.requests == [MetadataRequest(topics=())] * 2


def test_unhealthy_until_the_cluster_metadata_lists_it(stub: StubBroker) -> None:
    stub.response = _registered(stub.port, 2, 3)
    with pytest.raises(Unhealthy, match=r"broker 1 is not among the live brokers .* \(live: 2,3\)"):
        check(_config(stub.port))  # type: ignore[arg-type]


def test_unhealthy_when_registered_at_another_address(stub: StubBroker) -> None:
    stub.response = MetadataResponse(
        brokers=(BrokerEndpoint(1, "broker-1", stub.port),),
        cluster_id="c",
        controller_id=1,
        topics=(),
    )
    with pytest.raises(Unhealthy, match=r"registered at broker-1:\d+, but advertises 127\.0\.0\.1"):
        check(_config(stub.port))  # type: ignore[arg-type]


def test_unhealthy_without_a_controller(stub: StubBroker) -> None:
    stub.response = _registered(stub.port, 1, controller=-1)
    with pytest.raises(Unhealthy, match="no controller"):
        check(_config(stub.port))  # type: ignore[arg-type]


def test_unhealthy_when_nothing_listens() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(Unhealthy, match=f"no Metadata answer from 127.0.0.1:{port}"):
            check(_config(port), timeout_s=2)  # type: ignore[arg-type]


def test_cmdline_of_a_broker() -> None:
    argv = [
        "/usr/local/bin/python",
        "/usr/local/bin/highwater",
        "broker",
        "--config",
        "/etc/highwater/server.properties",
        "--override",
        "broker.id=2",
        "--override=listeners=PLAINTEXT://0.0.0.0:9093",
    ]
    assert broker_args_from_cmdline(argv) == BrokerArgs(
        Path("/etc/highwater/server.properties"),
        ("broker.id=2", "listeners=PLAINTEXT://0.0.0.0:9093"),
    )
    assert broker_args_from_cmdline(
        ["python3", "-m", "client.cli", "broker", "--override", "broker.id=3"]
    ) == BrokerArgs(None, ("broker.id=3",))


@pytest.mark.parametrize(
    "argv",
    [
        ["/usr/local/bin/highwater", "cluster", "describe"],
        ["python", "-m", "broker.healthcheck"],
        ["java", "org.apache.zookeeper.server.quorum.QuorumPeerMain", "broker"],
        [""],
    ],
)
def test_other_command_lines_are_not_brokers(argv: list[str]) -> None:
    assert broker_args_from_cmdline(argv) is None


def _fake_proc(tmp_path: Path, processes: dict[int, list[str]]) -> Path:
    for pid, argv in processes.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (tmp_path / "self").mkdir()
    return tmp_path


def test_finds_the_one_broker_process(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path,
        {
            1: ["python", "/usr/local/bin/highwater", "broker", "--override", "broker.id=1"],
            40: ["python", "-m", "broker.healthcheck"],
        },
    )
    assert find_broker_args(proc) == BrokerArgs(None, ("broker.id=1",))


def test_no_broker_or_several_brokers_is_unhealthy(tmp_path: Path) -> None:
    none = tmp_path / "none"
    none.mkdir()
    with pytest.raises(Unhealthy, match="no `highwater broker` process"):
        find_broker_args(_fake_proc(none, {40: ["python", "-m", "broker.healthcheck"]}))
    two = tmp_path / "two"
    two.mkdir()
    _fake_proc(
        two,
        {
            7: ["highwater", "broker", "--override", "broker.id=1"],
            8: ["highwater", "broker", "--override", "broker.id=2"],
        },
    )
    with pytest.raises(Unhealthy, match=r"several brokers run here \(pids 7, 8\)"):
        find_broker_args(two)


def test_main_exit_status_and_one_line(
    stub: StubBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = [
        "--override", "broker.id=1",
        "--override", f"listeners=PLAINTEXT://0.0.0.0:{stub.port}",
        "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{stub.port}",
        "--override", "zookeeper.connect=zookeeper:2181",
    ]  # fmt: skip
    assert main(flags) == 1
    assert capsys.readouterr().out.startswith("unhealthy: broker 1 is not among the live brokers")
    stub.response = _registered(stub.port, 1)
    assert main(flags) == 0
    assert capsys.readouterr().out.startswith("broker 1 serving at")
    assert main(["--override", "broker.id=x"]) == 1
    assert capsys.readouterr().out.startswith("unhealthy: ")
