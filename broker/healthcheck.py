"""Is this broker registered and serving? A container health check: `python -m broker.healthcheck`.

Healthy means all of:
- the broker answers a Metadata request on its inter-broker listener, the internal one (it is
  serving; a secured listener is logged in to as the broker itself: its sasl.jaas.config and
  TLS files);
- the live brokers in that answer include its own broker.id at the address it advertises (the
  controller has seen its registration in ZooKeeper and sent it the cluster's metadata);
- the advertised address, resolved from where the check runs, reaches a broker that says the
  same (a wrong advertised listener fails here rather than in the first client).

The broker's settings are read from its command line (`highwater broker --config ...
--override ...`, found under /proc), so the same check, with no arguments, fits every broker of
a compose file or an image's HEALTHCHECK. `--config`/`--override` given here are used instead.
Exit status 0 when healthy, 1 otherwise, with one line saying why (container engines keep it
with the health state).

Blocking sockets and the sans-IO protocol on a PLAINTEXT listener, so a check every few seconds
costs little; the client's connect (trio) on a secured one.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from broker.config.broker_config import BrokerConfig, ConfigError, load_config
from broker.inter_broker import inter_broker_security
from client.network import BrokerConnectionError, connect
from client.security import ClientSecurity
from protocol.client_protocol import ClientProtocol, ReceivedResponse
from protocol.errors import HighwaterError
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = ["BrokerArgs", "Unhealthy", "broker_args_from_cmdline", "check", "main"]

DEFAULT_TIMEOUT_S = 5.0
_WILDCARDS = ("", "0.0.0.0", "::")


class Unhealthy(Exception):
    """The broker is not (yet) registered and serving; the message says what failed."""


@dataclass(frozen=True, slots=True)
class BrokerArgs:
    """The settings arguments of a `highwater broker` command line."""

    config_path: Path | None
    overrides: tuple[str, ...]


def broker_args_from_cmdline(argv: Sequence[str]) -> BrokerArgs | None:
    """The --config/--override arguments when argv runs `highwater broker`, else None.

    Recognises `highwater broker ...` (any path to the script) and `python -m client.cli
    broker ...`.
    """
    start = None
    for i, arg in enumerate(argv[:-1]):
        if (os.path.basename(arg) == "highwater" or arg == "client.cli") and argv[
            i + 1
        ] == "broker":
            start = i + 2
            break
    if start is None:
        return None
    config_path: Path | None = None
    overrides: list[str] = []
    rest = list(argv[start:])
    while rest:
        arg = rest.pop(0)
        for flag in ("--config", "--override"):
            if arg == flag and rest:
                value = rest.pop(0)
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
            else:
                continue
            if flag == "--config":
                config_path = Path(value)
            else:
                overrides.append(value)
    return BrokerArgs(config_path, tuple(overrides))


def _running_brokers(proc: Path = Path("/proc")) -> Iterator[tuple[int, BrokerArgs]]:
    own = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        found = broker_args_from_cmdline([a.decode(errors="replace") for a in raw.split(b"\0")])
        if found is not None:
            yield int(entry.name), found


def find_broker_args(proc: Path = Path("/proc")) -> BrokerArgs:
    found = sorted(_running_brokers(proc), key=lambda pair: pair[0])
    if not found:
        raise Unhealthy("no `highwater broker` process runs here")
    if len({args for _, args in found}) > 1:
        pids = ", ".join(str(pid) for pid, _ in found)
        raise Unhealthy(f"several brokers run here (pids {pids}): pass --config/--override")
    return found[0][1]


def _metadata(
    host: str, port: int, deadline: float, security: ClientSecurity | None = None
) -> MetadataResponse:
    """One Metadata request (no topics) on a fresh connection."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Unhealthy("timed out")
    if security is not None:
        return _secured_metadata(host, port, remaining, security)
    protocol = ClientProtocol("highwater-healthcheck")
    try:
        with socket.create_connection((host, port), timeout=remaining) as sock:
            _, frame = protocol.send_request(MetadataRequest(topics=()))
            sock.sendall(frame)
            while True:
                response = protocol.next_response()
                if isinstance(response, ReceivedResponse):
                    assert isinstance(response.body, MetadataResponse)
                    return response.body
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise Unhealthy(f"{host}:{port} closed the connection")
                protocol.receive_data(data)
    except (OSError, HighwaterError) as exc:
        raise Unhealthy(f"no Metadata answer from {host}:{port}: {exc or 'timed out'}") from exc


def _secured_metadata(
    host: str, port: int, remaining_s: float, security: ClientSecurity
) -> MetadataResponse:
    async def ask() -> MetadataResponse:
        timeout_ms = max(1, int(remaining_s * 1000))
        conn = await connect(host, port, timeout_ms=timeout_ms, security=security)
        try:
            response: MetadataResponse = await conn.request(
                MetadataRequest(topics=()), timeout_ms=timeout_ms
            )
            return response
        finally:
            await conn.aclose()

    try:
        return trio.run(ask)
    except BrokerConnectionError as exc:
        raise Unhealthy(f"no Metadata answer from {host}:{port}: {exc}") from exc


def _registered_as(response: MetadataResponse, config: BrokerConfig, where: str) -> tuple[str, int]:
    """The address this broker is registered at, per `response`; Unhealthy if it is not."""
    me = next((b for b in response.brokers if b.node_id == config.broker_id), None)
    if me is None:
        live = ",".join(str(b.node_id) for b in response.brokers) or "none"
        raise Unhealthy(
            f"broker {config.broker_id} is not among the live brokers {where} (live: {live})"
        )
    # advertised port 0: the broker advertises whichever port it bound; only the host is known.
    expected_port = config.advertised_port or me.port
    if (me.host, me.port) != (config.advertised_host, expected_port):
        raise Unhealthy(
            f"broker {config.broker_id} is registered at {me.host}:{me.port}, but advertises "
            f"{config.advertised_host}:{expected_port}"
        )
    if response.controller_id < 0:
        raise Unhealthy(f"no controller {where}")
    return me.host, me.port


def check(config: BrokerConfig, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Raise Unhealthy unless the broker of `config` is registered and serving; else a summary."""
    if config.listener_port == 0:
        raise Unhealthy("listeners asks for any free port: pass --override listeners=<the port>")
    deadline = time.monotonic() + timeout_s
    host = "127.0.0.1" if config.listener_host in _WILDCARDS else config.listener_host
    security = inter_broker_security(config)
    own = _metadata(host, config.listener_port, deadline, security)
    advertised_host, advertised_port = _registered_as(
        own, config, f"in the metadata of {host}:{config.listener_port}"
    )
    advertised = f"{advertised_host}:{advertised_port}"
    seen = _metadata(advertised_host, advertised_port, deadline, security)
    _registered_as(seen, config, f"in the metadata of {advertised} (its advertised address)")
    return (
        f"broker {config.broker_id} serving at {advertised}: {len(own.brokers)} live brokers, "
        f"controller {own.controller_id}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m broker.healthcheck",
        description="Exit 0 when this broker is registered and serving (see the module doc).",
    )
    parser.add_argument("--config", type=Path, help="server.properties (default: the broker's)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S)
    args = parser.parse_args(argv)
    try:
        if args.config is not None or args.override:
            broker = BrokerArgs(args.config, tuple(args.override))
        else:
            broker = find_broker_args()
        config = load_config(broker.config_path, broker.overrides)
        print(check(config, args.timeout_s))
    except (Unhealthy, ConfigError) as exc:
        print(f"unhealthy: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
