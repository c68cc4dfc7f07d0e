"""The local cluster behind `make up` / `highwater dev up`: ZooKeeper plus N brokers on loopback.

Every process is a `ProcessSpec` (client/cli/local_processes.py) tracked by a pid file in one
directory; `up` starts the ones not already running, `down` stops them in reverse order
(SIGTERM, then SIGKILL after a timeout), `status` reports them. The shape of the cluster
(broker count, ports) is saved in `<dir>/cluster.json` by `up`, so `status` and `down` act on
exactly what `up` started. The directory's layout: docs/operations.md ("Local cluster").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from client.admin import Admin
from client.cli import local_security
from client.cli.local_processes import (
    Probe,
    ProcessSpec,
    ProcessState,
    ensure_started,
    ensure_stopped,
    is_ours,
    log_tail,
    probe,
    read_pid,
)
from client.cli.zookeeper_server import (
    PortInUseError,
    ZooKeeperServer,
    four_letter_word,
    port_free,
)
from client.errors import HighwaterClientError
from client.network import BrokerConnectionError, connect
from client.security import ClientSecurity
from client.security_admin import upsert_user
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = [
    "BROKER_HOST",
    "DEFAULT_BASE_PORT",
    "DEFAULT_BROKERS",
    "DEFAULT_DIR",
    "DEFAULT_ZK_PORT",
    "METRICS_PORT_OFFSET",
    "ClusterError",
    "ClusterLayout",
    "Probe",
    "ProcessSpec",
    "ProcessState",
    "broker_command",
    "broker_properties",
    "cluster_specs",
    "down",
    "fetch_metadata",
    "load_layout",
    "migration_command",
    "probe",
    "status",
    "up",
]

DEFAULT_DIR = Path(".local-cluster")
DEFAULT_ZK_PORT = 2181
DEFAULT_BASE_PORT = 9092
# Broker N's metrics listener (/metrics and the status page) is on base-port + 552 + N - 1:
# 9644 for broker 1 by default (the port Redpanda's admin API made familiar).
METRICS_PORT_OFFSET = 552
# Broker N's Kafka-protocol listener, for Kafka's own clients (docs/kafka.md): base-port + 100
# + N - 1, 9192 for broker 1 by default.
KAFKA_PORT_OFFSET = 100
DEFAULT_BROKERS = 3
ZK_HOST = "127.0.0.1"
BROKER_HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
LAYOUT_FILE = "cluster.json"
_POLL_S = 0.2

Echo = Callable[[str], None]


class ClusterError(RuntimeError):
    """The local cluster could not be brought up, down or inspected."""


@dataclass(frozen=True)
class ClusterLayout:
    """The shape of one local cluster; ports are consecutive from base_port (broker 1 first)."""

    root: Path
    brokers: int = DEFAULT_BROKERS
    base_port: int = DEFAULT_BASE_PORT
    zk_port: int = DEFAULT_ZK_PORT
    # SASL_SSL on the client ports, SASL_PLAINTEXT between brokers, ACLs (local_security.py).
    secure: bool = False

    def broker_ids(self) -> range:
        return range(1, self.brokers + 1)

    def broker_port(self, broker_id: int) -> int:
        return self.base_port + broker_id - 1

    def internal_port(self, broker_id: int) -> int:
        """A secured cluster's inter-broker listener: the ports after the client ones."""
        return self.base_port + self.brokers + broker_id - 1

    def probe_security(self) -> ClientSecurity | None:
        return local_security.broker_security(self.root) if self.secure else None

    def kafka_port(self, broker_id: int) -> int:
        return self.base_port + KAFKA_PORT_OFFSET + broker_id - 1

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"{BROKER_HOST}:{self.kafka_port(b)}" for b in self.broker_ids())

    def metrics_port(self, broker_id: int) -> int:
        return self.base_port + METRICS_PORT_OFFSET + broker_id - 1

    def status_page(self, broker_id: int) -> str:
        return f"http://{BROKER_HOST}:{self.metrics_port(broker_id)}/"

    def broker_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def config_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "server.properties"

    def log_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "broker.log"

    @property
    def zk_connect(self) -> str:
        return f"{ZK_HOST}:{self.zk_port}"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{BROKER_HOST}:{self.broker_port(b)}" for b in self.broker_ids())

    def to_json(self) -> str:
        fields = {
            "brokers": self.brokers,
            "base_port": self.base_port,
            "zk_port": self.zk_port,
            "secure": self.secure,
        }
        return json.dumps(fields) + "\n"


def load_layout(root: Path) -> ClusterLayout | None:
    """The layout the last `up` saved in root, or None if there is none (or it is unreadable)."""
    try:
        saved = json.loads((root / LAYOUT_FILE).read_text())
        return ClusterLayout(
            root,
            int(saved["brokers"]),
            int(saved["base_port"]),
            int(saved["zk_port"]),
            bool(saved.get("secure", False)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def broker_properties(layout: ClusterLayout, broker_id: int) -> str:
    """server.properties for one local broker, in Kafka's names."""
    port = layout.broker_port(broker_id)
    kafka = f"KAFKA://{BROKER_HOST}:{layout.kafka_port(broker_id)}"
    settings = {
        "broker.id": broker_id,
        "listeners": f"PLAINTEXT://{BROKER_HOST}:{port},{kafka}",
        "advertised.listeners": f"PLAINTEXT://{BROKER_HOST}:{port},{kafka}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT",
        "listener.wire.protocol.map": "KAFKA:kafka",
        "metrics.listener": f"http://{BROKER_HOST}:{layout.metrics_port(broker_id)}",
        "zookeeper.connect": layout.zk_connect,
        "zookeeper.session.timeout.ms": 6000,
        "log.dirs": layout.broker_dir(broker_id) / "data",
        "num.partitions": 1,
        "default.replication.factor": 1,
        # Kafka waits for this many live brokers before creating __consumer_offsets.
        "offsets.topic.replication.factor": min(3, layout.brokers),
    }
    if layout.secure:
        settings.update(
            local_security.broker_settings(
                layout.root,
                f"{BROKER_HOST}:{port}",
                f"{BROKER_HOST}:{layout.internal_port(broker_id)}",
            )
        )
    lines = ["# Written by `highwater dev up`; rewritten on every start of this broker."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def broker_command(config_path: Path) -> list[str]:
    """How `up` runs a broker: this interpreter's CLI, so the venv's packages are used."""
    return [sys.executable, "-m", "client.cli", "broker", "--config", str(config_path)]


def cluster_specs(
    layout: ClusterLayout, start_timeout_s: float = START_TIMEOUT_S
) -> list[ProcessSpec]:
    """Everything `up` starts, in start order: ZooKeeper, then brokers 1..N."""
    specs = [_zookeeper_spec(layout, start_timeout_s)]
    specs += [_broker_spec(layout, broker_id) for broker_id in layout.broker_ids()]
    return specs


# --- commands -------------------------------------------------------------------------------


def up(
    root: Path = DEFAULT_DIR,
    *,
    brokers: int = DEFAULT_BROKERS,
    base_port: int = DEFAULT_BASE_PORT,
    zk_port: int = DEFAULT_ZK_PORT,
    echo: Echo = print,
    timeout_s: float = START_TIMEOUT_S,
    secure: bool = False,
) -> ClusterLayout:
    """Start what is not running yet (keeping what is); wait until the whole cluster answers."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    layout = _layout_for_up(ClusterLayout(root, brokers, base_port, zk_port, secure))
    if secure:
        try:
            local_security.ensure_secrets(root)
        except (local_security.SecureSetupError, OSError) as exc:
            raise ClusterError(str(exc)) from exc
    specs = cluster_specs(layout, timeout_s)
    _check_ports_free(layout, specs)
    (root / LAYOUT_FILE).write_text(layout.to_json())
    zookeeper, *brokers_specs = specs
    ensure_started(zookeeper, echo)
    _match_zookeeper_acls(layout, echo)
    for spec in brokers_specs:
        ensure_started(spec, echo)
    _wait_cluster_ready(layout, specs, timeout_s)
    echo(f"ZooKeeper: {layout.zk_connect}; {layout.brokers} broker(s): {layout.bootstrap}")
    if not layout.secure:
        echo(f"Kafka clients (kcat, librdkafka, Java, Spark): {layout.kafka_bootstrap}")
    if secure:
        _set_up_admin(layout, echo)
        return layout
    echo(f"Pid files, data and logs are in {root}.")
    echo(f"Status page: {layout.status_page(1)} (any broker's; /metrics for Prometheus)")
    echo("")
    echo("The cluster is ready. Try (every broker in the bootstrap list: any one may be down):")
    echo(f"  export HIGHWATER_BOOTSTRAP={layout.bootstrap}")
    echo("  highwater cluster describe")
    replicas = min(3, layout.brokers)  # Kafka's guarantees need replicas
    echo(f"  highwater topics create demo --partitions 6 --replication-factor {replicas}")
    echo("  seq 10 | highwater produce demo")
    echo("  highwater consume demo --from-beginning --exit-at-end")
    echo("Check it with `highwater dev status`, stop it with `highwater dev down`.")
    return layout


def migration_command(config_path: Path, acl: str) -> list[str]:
    """Kafka's zookeeper-security-migration, as `up` runs it (this interpreter's CLI)."""
    return [
        sys.executable, "-m", "client.cli", "zookeeper-security-migration",
        "--zookeeper.acl", acl, "--config", str(config_path),
    ]  # fmt: skip


def _match_zookeeper_acls(layout: ClusterLayout, echo: Echo) -> None:
    """Before the brokers start: a secured cluster's znodes get ZooKeeper ACLs, also those an
    earlier `up` without --secure made; a directory secured before is opened again for an
    `up` without it (its brokers have no ZooKeeper login). Both are idempotent."""
    properties = local_security.zookeeper_properties_path(layout.root)
    if layout.secure:
        local_security.write_zookeeper_properties(layout.root, layout.zk_connect)
    elif not properties.exists():
        return
    acl = "secure" if layout.secure else "unsecure"
    done = subprocess.run(
        migration_command(properties, acl),
        capture_output=True,
        text=True,
        check=False,
        timeout=START_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise ClusterError(
            f"could not set the ZooKeeper ACLs ({acl}): {(done.stderr or done.stdout).strip()}"
        )
    echo(f"ZooKeeper ACLs: {done.stdout.strip()}")
    if not layout.secure:
        properties.unlink()


def _set_up_admin(layout: ClusterLayout, echo: Echo) -> None:
    """The admin user (created as the brokers' own super user), and the client settings."""

    async def create() -> None:
        async with Admin(layout.bootstrap, security=layout.probe_security()) as admin:
            password = local_security.admin_security(layout.root).password
            assert password is not None
            await upsert_user(admin, local_security.ADMIN_USER, password)

    try:
        trio.run(create)
    except (HighwaterClientError, BrokerConnectionError, OSError) as exc:
        raise ClusterError(f"could not create the admin user: {exc}") from exc
    properties = local_security.write_client_properties(layout.root)
    echo("SASL_SSL on the client ports (SCRAM-SHA-256/512, PLAIN), ACLs on; a CA in")
    echo(f"{layout.root / 'tls'}. The admin user (a super user) logs in with the client")
    echo(f"properties in {properties} (mode 0600: it holds the password).")
    echo("ZooKeeper: only the brokers' login may change the cluster's znodes or read")
    echo(f"credentials (zookeeper.set.acl; the login is in {layout.root / 'tls'}).")
    echo("")
    echo("Try:")
    echo(f"  export HIGHWATER_BOOTSTRAP={layout.bootstrap}")
    echo(f"  export HIGHWATER_COMMAND_CONFIG={properties}")
    echo("  highwater users add alice")
    echo("  highwater topics create demo --partitions 6 --replication-factor 3")
    echo("  highwater acls add --allow-principal User:alice --producer --topic demo")
    echo("  seq 10 | highwater produce demo")
    echo("Check it with `highwater dev status`, stop it with `highwater dev down`.")


def down(root: Path = DEFAULT_DIR, echo: Echo = print, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop everything `up` started (brokers first, ZooKeeper last) and remove the pid files."""
    layout = _layout_for(root.resolve())
    for spec in reversed(cluster_specs(layout)):
        ensure_stopped(spec, echo, timeout_s)


def status(root: Path = DEFAULT_DIR, echo: Echo = print) -> bool:
    """Print each process, its pid and whether it answers; True if all are running."""
    layout = _layout_for(root.resolve())
    healthy = True
    for spec in cluster_specs(layout):
        result = probe(spec)
        healthy = healthy and result.state is ProcessState.RUNNING
        pid = "-" if result.pid is None else str(result.pid)
        echo(f"{spec.name}: {result.state.value}, pid {pid}, {spec.address}")
    pages = ", ".join(layout.status_page(b) for b in layout.broker_ids())
    echo(f"status pages (and /metrics): {pages}")
    return healthy


# --- the layout of the cluster `up` works on ------------------------------------------------


def _layout_for(root: Path) -> ClusterLayout:
    """What the last `up` saved; without it, the defaults plus any broker pid files found."""
    saved = load_layout(root)
    if saved is not None:
        return saved
    found = [int(p.stem.removeprefix("broker-")) for p in root.glob("broker-*.pid")]
    numbered = [n for n in found if n > 0]
    return ClusterLayout(root, brokers=max([DEFAULT_BROKERS, *numbered]))


def _layout_for_up(requested: ClusterLayout) -> ClusterLayout:
    """The requested layout, unless an earlier `up` left processes running in another one."""
    saved = load_layout(requested.root)
    if saved is None or saved == requested:
        return requested
    running = [
        spec.name
        for spec in cluster_specs(saved)
        if probe(spec).state in (ProcessState.RUNNING, ProcessState.NOT_ANSWERING)
    ]
    if not running:
        return requested
    raise ClusterError(
        f"a cluster started with other settings ({saved.brokers} broker(s) from port "
        f"{saved.base_port}, ZooKeeper on {saved.zk_port}) still runs in {requested.root} "
        f"({', '.join(running)}); run `highwater dev down` first"
    )


def _check_ports_free(layout: ClusterLayout, specs: list[ProcessSpec]) -> None:
    """Fail before starting anything if a port we need belongs to a process we did not start."""
    ports = {"zookeeper": [layout.zk_port]}
    ports.update(
        {
            f"broker-{b}": [layout.broker_port(b), layout.metrics_port(b)]
            for b in layout.broker_ids()
        }
    )
    if layout.secure:
        for b in layout.broker_ids():
            ports[f"broker-{b}"].append(layout.internal_port(b))
    for spec in specs:
        if probe(spec).state in (ProcessState.RUNNING, ProcessState.NOT_ANSWERING):
            continue  # ours, from an earlier `up`
        for port in ports[spec.name]:
            if not port_free(BROKER_HOST, port):
                option = "--zk-port" if spec.name == "zookeeper" else "--base-port"
                raise ClusterError(
                    f"cannot start {spec.label}: port {port} is already in use by another "
                    f"process; stop that process or choose other ports with {option}"
                )


# --- starting and stopping ----------------------------------------------------------------


def _wait_cluster_ready(layout: ClusterLayout, specs: list[ProcessSpec], timeout_s: float) -> None:
    """Bounded wait until every process answers and every broker sees all N brokers."""
    deadline = time.monotonic() + timeout_s
    waiting_for = ""
    while True:
        waiting_for = _not_ready(layout, specs)
        if not waiting_for:
            return
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"the cluster was not ready within {timeout_s:g}s: {waiting_for}; "
                f"see the logs under {layout.root}, then `highwater dev down`"
            )
        time.sleep(_POLL_S)


def _not_ready(layout: ClusterLayout, specs: list[ProcessSpec]) -> str:
    """Why the cluster is not ready yet ("" when it is); raises if a process died."""
    expected = set(layout.broker_ids())
    for spec in specs:
        pid = read_pid(spec.pid_file)
        if pid is None or not is_ours(pid, spec.marker):
            tail = log_tail(spec.log_path) if spec.log_path else ""
            raise ClusterError(
                f"{spec.label} exited while starting"
                + (f"; last lines of {spec.log_path}:\n{tail}" if tail else "")
                + "\nwhat did start is left running for a look; `highwater dev down` stops it"
            )
        if spec.name == "zookeeper":
            if not spec.answers():
                return "ZooKeeper does not answer"
            continue
        broker_id = int(spec.name.removeprefix("broker-"))
        metadata = fetch_metadata(
            BROKER_HOST, layout.broker_port(broker_id), security=layout.probe_security()
        )
        if metadata is None:
            return f"{spec.label} does not answer on {spec.address}"
        seen = {b.node_id for b in metadata.brokers}
        if seen != expected or metadata.controller_id not in expected:
            return (
                f"{spec.label} sees brokers {sorted(seen)} and controller "
                f"{metadata.controller_id}, expected brokers {sorted(expected)}"
            )
    return ""


# --- brokers --------------------------------------------------------------------------------


def fetch_metadata(
    host: str, port: int, timeout_s: float = 2.0, security: ClientSecurity | None = None
) -> MetadataResponse | None:
    """One Metadata request (no topics) to host:port; None if it does not answer in time."""

    async def ask() -> MetadataResponse:
        conn = await connect(
            host,
            port,
            client_id="highwater-dev",
            timeout_ms=int(timeout_s * 1000),
            security=security,
        )
        try:
            response: MetadataResponse = await conn.request(
                MetadataRequest(topics=()), timeout_ms=int(timeout_s * 1000)
            )
            return response
        finally:
            await conn.aclose()

    try:
        return trio.run(ask)
    except (BrokerConnectionError, OSError):
        return None


def _broker_spec(layout: ClusterLayout, broker_id: int) -> ProcessSpec:
    port = layout.broker_port(broker_id)
    config_path = layout.config_path(broker_id)
    log_path = layout.log_path(broker_id)

    def start() -> int:
        (layout.broker_dir(broker_id) / "data").mkdir(parents=True, exist_ok=True)
        # 0600: with --secure it holds the broker super user's password (sasl.jaas.config).
        local_security.write_private(config_path, broker_properties(layout, broker_id))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with log_path.open("ab") as log:
            # New session: Ctrl-C in the launching terminal must not reach the broker, and it
            # outlives `up`. No inherited pipes, so callers capturing our output never hang.
            proc = subprocess.Popen(
                broker_command(config_path),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=layout.broker_dir(broker_id),
                env=env,
                start_new_session=True,
            )
        proc.returncode = 0  # detached: Popen.__del__ must neither warn nor reap it
        return proc.pid

    return ProcessSpec(
        name=f"broker-{broker_id}",
        label=f"broker {broker_id}",
        root=layout.root,
        address=f"{BROKER_HOST}:{port}",
        marker=str(config_path),
        start=start,
        answers=lambda: (
            fetch_metadata(BROKER_HOST, port, security=layout.probe_security()) is not None
        ),
        log_path=log_path,
    )


# --- ZooKeeper ------------------------------------------------------------------------------


def _zookeeper_spec(layout: ClusterLayout, start_timeout_s: float = START_TIMEOUT_S) -> ProcessSpec:
    port = layout.zk_port
    server = ZooKeeperServer(layout.root / "zookeeper", port, host=ZK_HOST)

    def start() -> int:
        try:
            server.start(start_timeout_s)
        except PortInUseError as exc:
            raise ClusterError(
                f"cannot start ZooKeeper: port {port} is already in use by another process; "
                f"stop that process or choose another port with --zk-port"
            ) from exc
        return server.detach()

    def answers() -> bool:
        try:
            return four_letter_word(ZK_HOST, port, "ruok", timeout_s=1.0) == "imok"
        except OSError:
            return False

    return ProcessSpec(
        name="zookeeper",
        label="ZooKeeper",
        root=layout.root,
        address=server.connect_string,
        marker=str(server.config_path),
        start=start,
        answers=answers,
        log_path=server.log_path,
    )
