"""Run a standalone ZooKeeper from Debian's `zookeeper` package as a child process.

Used by the local-cluster launcher and by the integration tests. Synchronous on purpose: it
is called from the CLI and from pytest fixtures, never from inside a trio event loop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

__all__ = [
    "ZK_CLASSPATH",
    "ZK_JAR",
    "PortInUseError",
    "ZooKeeperError",
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "find_java",
    "four_letter_word",
    "free_port",
    "pid_alive",
    "port_accepts",
    "port_free",
    "require_zookeeper",
    "stop_pid",
    "zookeeper_installed",
]

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
# Debian's ZooKeeper 3.8 logs through slf4j -> log4j 1.2; both jars come with the package.
ZK_CLASSPATH = (
    ZK_JAR,
    Path("/usr/share/java/slf4j-log4j12.jar"),
    Path("/usr/share/java/log4j-1.2.jar"),
)
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_INSTALL_HINT = "run `make zookeeper` (or `apt-get install -y zookeeper`)"
_POLL_S = 0.05
_LOG_TAIL_LINES = 30


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be started, reached or stopped."""


class ZooKeeperNotInstalledError(ZooKeeperError):
    """The ZooKeeper jars or a `java` binary are missing."""


class PortInUseError(ZooKeeperError):
    """Something else already listens on the requested client port."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"port {port} on {host} is already in use by another process")
        self.host = host
        self.port = port


# --- installation -------------------------------------------------------------------------


def find_java() -> str:
    """Path of the `java` binary: $JAVA_HOME/bin/java if set, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperNotInstalledError(
            f"no `java` found on PATH or in $JAVA_HOME; {_INSTALL_HINT}"
        )
    return found


def zookeeper_installed() -> bool:
    """True when the ZooKeeper jars and a `java` binary are present."""
    try:
        require_zookeeper()
    except ZooKeeperNotInstalledError:
        return False
    return True


def require_zookeeper() -> None:
    """Raise a ZooKeeperNotInstalledError telling the user how to install what is missing."""
    missing = [str(jar) for jar in ZK_CLASSPATH if not jar.is_file()]
    if missing:
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper is not installed ({', '.join(missing)} missing); {_INSTALL_HINT}"
        )
    find_java()


# --- sockets --------------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_free(host: str, port: int) -> bool:
    """True if we could bind host:port, i.e. no one listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR like ZooKeeper's own listener, so TIME_WAIT leftovers don't count as taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def port_accepts(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True if a TCP connection to host:port succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def four_letter_word(host: str, port: int, cmd: str, timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole reply (server closes after it)."""
    if len(cmd) != 4:
        raise ValueError(f"four-letter words have four letters, got {cmd!r}")
    chunks: list[bytes] = []
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(cmd.encode("ascii"))
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _serving(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """ZooKeeper answers `ruok` before it serves requests; `srvr` names its mode only once it
    does (before, it says "not currently serving requests")."""
    try:
        if four_letter_word(host, port, "ruok", timeout_s) != "imok":
            return False
        return "Mode:" in four_letter_word(host, port, "srvr", timeout_s)
    except OSError:
        return False


# --- processes by pid (the launcher stops processes started by an earlier command) ---------


def pid_alive(pid: int) -> bool:
    """True if pid exists and is not a zombie (our PID 1 may never reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    # The state field follows the parenthesised command name, which may itself contain ')'.
    state = stat.rpartition(")")[2].split()[0]
    return state not in ("Z", "X")


def stop_pid(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM pid, wait up to timeout_s for it to go, then SIGKILL it."""
    if not _signal(pid, signal.SIGTERM):
        return
    if _wait_gone(pid, timeout_s):
        return
    _signal(pid, signal.SIGKILL)
    if not _wait_gone(pid, 5.0):
        raise ZooKeeperError(f"process {pid} survived SIGKILL")


def _signal(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        _reap(pid)
        time.sleep(_POLL_S)
    return True


def _reap(pid: int) -> None:
    # If pid is our own child, collect it so it does not linger as a zombie.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# --- the server -------------------------------------------------------------------------


class ZooKeeperServer:
    """One standalone ZooKeeper, with its config, data and logs under data_dir."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        host: str = "127.0.0.1",
        tick_time_ms: int = 2000,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.port = port
        self.host = host
        self.tick_time_ms = tick_time_ms
        self._proc: subprocess.Popen[bytes] | None = None

    # paths: everything lives in data_dir so one directory is one server
    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log4j_path(self) -> Path:
        return self.data_dir / "log4j.properties"

    @property
    def log_path(self) -> Path:
        """ZooKeeper's own log (log4j)."""
        return self.data_dir / "zookeeper.log"

    @property
    def console_path(self) -> Path:
        """The JVM's stdout/stderr: crashes before logging is set up land here."""
        return self.data_dir / "zookeeper.out"

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the JVM and return once it answers `ruok`; raise ZooKeeperError otherwise."""
        if self.is_running():
            raise ZooKeeperError(f"ZooKeeper already started (pid {self.pid})")
        require_zookeeper()
        # Checked up front: otherwise another server on this port would answer our `ruok`.
        if not port_free(self.host, self.port):
            raise PortInUseError(self.host, self.port)
        self._write_configs()
        self._proc = self._spawn()
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the JVM, wait up to timeout_s, then SIGKILL. Safe to call twice."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5.0)
        self._proc = None

    def detach(self) -> int:
        """Forget the running process so it outlives us (the launcher); returns its pid."""
        if self._proc is None or self._proc.poll() is not None:
            raise ZooKeeperError("ZooKeeper is not running")
        pid = self._proc.pid
        # Mark it handled so Popen.__del__ neither warns nor tries to reap it later.
        self._proc.returncode = 0
        self._proc = None
        return pid

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def four_letter_word(self, cmd: str, timeout_s: float = 2.0) -> str:
        return four_letter_word(self.host, self.port, cmd, timeout_s)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """Last lines of the JVM console and of ZooKeeper's log, for error messages."""
        parts = []
        for path in (self.console_path, self.log_path):
            text = _tail(path, lines)
            if text:
                parts.append(f"--- {path} ---\n{text}")
        return "\n".join(parts) or "(no log output)"

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.connect_string}, pid={self.pid}, dir={self.data_dir})"

    # --- internals ---

    def _write_configs(self) -> None:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._zoo_cfg())
        self.log4j_path.write_text(self._log4j_properties())

    def _zoo_cfg(self) -> str:
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",  # else Jetty grabs port 8080
            "4lw.commands.whitelist=*",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
        ]
        return "\n".join(lines) + "\n"

    def _log4j_properties(self) -> str:
        lines = [
            "log4j.rootLogger=INFO, FILE",
            "log4j.appender.FILE=org.apache.log4j.FileAppender",
            f"log4j.appender.FILE.File={self.log_path}",
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n",
        ]
        return "\n".join(lines) + "\n"

    def _command(self) -> list[str]:
        return [
            find_java(),
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Dlog4j.configuration=file:{self.log4j_path}",
            "-cp",
            ":".join(str(jar) for jar in ZK_CLASSPATH),
            _MAIN_CLASS,
            str(self.config_path),
        ]

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.console_path.open("ab") as console:
            # New session: Ctrl-C in the launching terminal must not hit ZooKeeper, and a
            # detached server survives its launcher. No inherited pipes, so callers that
            # capture our output do not wait on the JVM.
            return subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ZooKeeperError(
                    f"ZooKeeper on {self.connect_string} exited with code {code} "
                    f"while starting\n{self.log_tail()}"
                )
            if _serving(self.host, self.port, timeout_s=0.5):
                return
            if time.monotonic() >= deadline:
                raise ZooKeeperError(
                    f"ZooKeeper on {self.connect_string} did not start serving within "
                    f"{timeout_s:g}s\n{self.log_tail()}"
                )
            time.sleep(0.1)


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
