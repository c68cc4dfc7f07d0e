"""Drive docker-compose.yml with podman-compose, and the `highwater` CLI from the host, as a user.

Every call has a deadline (a subprocess timeout; conditions are polled until a deadline, never
slept on), and `ComposeProject.destroy` removes whatever the project left, whether or not the
steps before it succeeded.

The host client bootstraps from the brokers' EXTERNAL listeners, published and advertised as
127.0.0.1:1909N (docker-compose.yml): no names to resolve, no /etc/hosts line.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.compose.images import engine_env

__all__ = [
    "BROKERS",
    "METRICS_PORTS",
    "PUBLISHED_PORTS",
    "ComposeProject",
    "HostClient",
    "Timed",
    "find_podman_compose",
    "highwater_command",
    "wait_for",
]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = (
    ROOT / "docker-compose.yml",
    ROOT / "tests/compose/docker-compose.local-images.yml",
)
BROKERS = ("broker-1", "broker-2", "broker-3")
PUBLISHED_PORTS = {"broker-1": 19092, "broker-2": 19093, "broker-3": 19094}
# The brokers' EXTERNAL listeners advertise 127.0.0.1:1909N: a host client needs no names.
METRICS_PORTS = {"broker-1": 9644, "broker-2": 9645, "broker-3": 9646}  # on 127.0.0.1
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

T = TypeVar("T")


def find_podman_compose() -> str | None:
    """podman-compose from this Python's environment (the dev extra pins it), else PATH."""
    beside = Path(sys.executable).parent / "podman-compose"
    if beside.exists():
        return str(beside)
    return shutil.which("podman-compose")


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def wait_for(what: str, condition: Callable[[], T | None], timeout_s: float) -> T:
    """Poll `condition` until it returns something other than None/False; fail at the deadline.

    A condition that raises (a CLI call failing while leaders move, a container not there yet)
    counts as not yet true; the last error is reported at the deadline.
    """
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            result = condition()
        except (RuntimeError, TimeoutError, OSError, ValueError, KeyError) as exc:
            result, last_error = None, exc
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s{detail}")
        time.sleep(0.5)  # a poll interval, not a synchronisation


@dataclass
class Timed:
    """Wall time of each named step, for the test's report."""

    steps: list[tuple[str, float]] = field(default_factory=list)

    def run(self, name: str, fn: Callable[[], T]) -> T:
        started = time.monotonic()
        result = fn()
        self.steps.append((name, time.monotonic() - started))
        return result

    def lines(self) -> list[str]:
        return [f"  {name:<48} {seconds:6.1f} s" for name, seconds in self.steps]


def _run(
    argv: Sequence[str],
    timeout_s: float,
    *,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            list(argv),
            env=env,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError(f"`{' '.join(argv)}` did not finish within {timeout_s:.0f} s") from exc
    if check and done.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(argv)}` exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done


def _engine_noise(line: str) -> bool:
    """podman 4.3 without systemd logs these on every container start/stop; they are harmless."""
    return (
        "unable to get systemd connection" in line
        or line == "failed to connect to syslog: Initialization"
    )


def without_engine_noise(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not _engine_noise(line))


class ComposeProject:
    """One podman-compose project made of docker-compose.yml and the base-image override."""

    def __init__(self, project: str, podman_compose: str) -> None:
        self.project = project
        self._argv = [podman_compose, "-p", project]
        for path in COMPOSE_FILES:
            self._argv += ["-f", str(path)]
        self.env = engine_env()

    @property
    def argv(self) -> list[str]:
        """podman-compose with this project's name and compose files."""
        return list(self._argv)

    # --- podman-compose, as a user types it ---------------------------------------------------

    def compose(self, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        return _run([*self._argv, *args], timeout_s, env=self.env)

    def build(self, timeout_s: float) -> subprocess.CompletedProcess[str]:
        """`compose build` of the brokers' image (they share `image: highwater:dev`: one build).

        This workplace's network, through engine flags and a build argument the Dockerfile
        declares: builds run on the host network (the engine's own networks reach nothing
        outside) with the host's CA bundle for pip.
        """
        engine_flags = "--network host"
        build_args: list[str] = []
        if HOST_CA_BUNDLE.exists():
            engine_flags += f" --volume {HOST_CA_BUNDLE}:/host-ca.crt:ro"
            build_args = ["--build-arg", "PIP_CERT=/host-ca.crt"]
        return _run(
            [*self._argv, "--podman-build-args", engine_flags, "build", *build_args, "broker-1"],
            timeout_s,
            env=self.env,
        )

    # --- the engine, for what compose does not show -------------------------------------------

    def podman(
        self, *args: str, timeout_s: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return _run(["podman", *args], timeout_s, env=self.env, check=check)

    def containers(self) -> dict[str, str]:
        """service -> container name, for the project's containers (running or not)."""
        listed = self.podman(
            "ps", "-a", "--filter", f"label=io.podman.compose.project={self.project}",
            "--format", '{{.Names}} {{index .Labels "com.docker.compose.service"}}',
        )  # fmt: skip
        found = {}
        for line in listed.stdout.splitlines():
            name, _, service = line.strip().partition(" ")
            if service:
                found[service] = name
        return found

    def container(self, service: str) -> str:
        return self.containers()[service]

    def inspect(self, service: str) -> dict[str, Any]:
        data = json.loads(self.podman("inspect", self.container(service)).stdout)
        assert isinstance(data, list) and len(data) == 1
        return data[0]  # type: ignore[no-any-return]

    def healthy(self, service: str) -> bool:
        """Run the service's health check now (podman runs none by itself without systemd)."""
        done = self.podman("healthcheck", "run", self.container(service), check=False)
        return done.returncode == 0

    def health_output(self, service: str) -> str:
        state = self.inspect(service)["State"]
        health = state.get("Health") or state.get("Healthcheck") or {}
        log = health.get("Log") or []
        return str(log[-1].get("Output", "")).strip() if log else ""

    def status_table(self) -> str:
        return self.podman(
            "ps", "-a", "--filter", f"label=io.podman.compose.project={self.project}",
            "--format", "table {{.Names}}\t{{.Status}}\t{{.Ports}}",
        ).stdout  # fmt: skip

    def wait_healthy(self, services: Sequence[str], timeout_s: float) -> dict[str, float]:
        """Seconds until each service's health check first passed."""
        started = time.monotonic()
        passed: dict[str, float] = {}

        def all_passed() -> bool:
            for service in services:
                if service not in passed and self.healthy(service):
                    passed[service] = time.monotonic() - started
            return len(passed) == len(services)

        wait_for(f"health checks of {', '.join(services)}", all_passed, timeout_s)
        return passed

    def logs(self, service: str, tail: int | None = None) -> tuple[str, str]:
        """(stdout, stderr) of a service's container."""
        args = ["logs"] + (["--tail", str(tail)] if tail else []) + [self.container(service)]
        done = self.podman(*args, check=False)
        return done.stdout, without_engine_noise(done.stderr)

    def volumes(self) -> list[str]:
        listed = self.podman(
            "volume", "ls", "--filter", f"label=io.podman.compose.project={self.project}",
            "--format", "{{.Name}}",
        )  # fmt: skip
        return sorted(listed.stdout.split())

    def dump_logs(self, tail: int = 150) -> str:
        parts = []
        for service, name in sorted(self.containers().items()):
            try:
                out, err = self.logs(service, tail)
            except (RuntimeError, TimeoutError) as exc:
                out, err = "", str(exc)
            parts.append(f"===== {name} (last {tail} lines)\n{out}{err}")
        return "\n".join(parts)

    def destroy(self) -> list[str]:
        """Remove the project's containers, pod, network and volumes (named and anonymous),
        whatever state they are in; returns what had to be force-removed after `down -v`."""
        anonymous: set[str] = set()
        for name in self.containers().values():
            done = self.podman(
                "inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}", name, check=False
            )
            anonymous.update(v for v in done.stdout.split() if len(v) == 64)
        with contextlib.suppress(RuntimeError, TimeoutError):  # what it leaves is forced below
            self.compose("down", "-v", "--timeout", "10", timeout_s=120)
        forced = []
        label = f"label=io.podman.compose.project={self.project}"
        for name in self.containers().values():
            self.podman("rm", "-f", "-v", name, check=False)
            forced.append(f"container {name}")
        for kind in ("pod", "network", "volume"):
            listed = self.podman(
                kind, "ls", "--filter", label, "--format", "{{.Name}}", check=False
            )
            for name in listed.stdout.split():
                self.podman(kind, "rm", "-f", name, check=False)
                forced.append(f"{kind} {name}")
        for volume in sorted(anonymous):
            if self.podman("volume", "exists", volume, check=False).returncode == 0:
                self.podman("volume", "rm", "-f", volume, check=False)
        return forced


def highwater_command() -> list[str]:
    """The `highwater` console script of the tree under test, run by this Python.

    The entry point comes from this checkout's pyproject.toml rather than from a script in
    the environment's bin/, which may have been installed from another checkout (and the CLI's
    module is being moved).
    """
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["highwater"].partition(":")
    code = f"import sys; sys.argv[0] = 'highwater'; from {module} import {function} as m; m()"
    return [sys.executable, "-c", code]


class HostClient:
    """The `highwater` CLI on the host, bootstrapping from the published ports."""

    def __init__(self) -> None:
        self._cli = highwater_command()
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in PUBLISHED_PORTS.values())

    def argv(self, *args: str) -> list[str]:
        return [*self._cli, *args]

    def run(self, *args: str, timeout_s: float, input_text: str | None = None) -> str:
        return _run(self.argv(*args, "-b", self.bootstrap), timeout_s, input_text=input_text).stdout

    def describe_topic(self, topic: str, timeout_s: float = 60) -> list[dict[str, Any]]:
        described = json.loads(self.run("topics", "describe", topic, "--json", timeout_s=timeout_s))
        (only,) = described
        return sorted(only["partitions"], key=lambda p: p["partition"])  # type: ignore[no-any-return]
