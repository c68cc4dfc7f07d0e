"""docker-compose.yml as a user runs it: `make compose-up`, `make compose-status`,
`make compose-down` (docs/operations.md, "Docker Compose").

The engine: Docker Compose when a Docker daemon answers (`docker info`), else podman-compose;
HIGHWATER_COMPOSE_ENGINE=docker or =podman picks one. With podman, what the compose test does
(tests/integration/test_compose_cluster.py, through tests/compose/harness.py):

- the engine settings of tests/compose/containers.conf (runc, ulimits, no systemd), through
  CONTAINERS_CONF, and Docker's image format (the Dockerfile's HEALTHCHECK is kept);
- tests/compose/docker-compose.local-images.yml, which swaps in base images built locally from a
  debootstrapped Debian 12 (tests/compose/images.py: root, once per machine), since image
  registries may be unreachable;
- the image build on the host's network with the host's CA bundle for pip (PIP_CERT);
- the health checks run here, until each passes: podman 4.3 runs none by itself without
  systemd (its status would say "starting" for ever).

Nothing is installed: `make containers` installs podman, runc and debootstrap from apt.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.compose.harness import (
    BROKERS,
    COMPOSE_FILES,
    HOST_CA_BUNDLE,
    METRICS_PORTS,
    PUBLISHED_PORTS,
    ROOT,
    ComposeProject,
    find_podman_compose,
    port_in_use,
    wait_for,
    without_engine_noise,
)
from tests.compose.images import EngineUnavailable, ensure_images

PROJECT = "highwater"  # docker-compose.yml's `name:`
SERVICES = ("zookeeper", *BROKERS)
BUILD_S = 900
UP_S = 180
HEALTHY_S = 180
STOP_S = 120
_ABSENT = re.compile(r"Error: no (container|pod) with name or ID \S+ found: no such \w+$")
BOOTSTRAP = ",".join(f"127.0.0.1:{port}" for port in PUBLISHED_PORTS.values())


class Failed(Exception):
    """What went wrong and what to do about it (printed, exit 1)."""


def _say(line: str = "") -> None:
    print(line, flush=True)


def _typed(argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """A command line as a user would type it from the repository's root."""

    def short(word: str) -> str:
        return os.path.relpath(word, ROOT) if word.startswith(f"{ROOT}/") else word

    shown = [short(word) for word in argv]
    shown[0] = Path(shown[0]).name if shown[0].endswith("podman-compose") else shown[0]
    prefix = "".join(f"{k}={shlex.quote(short(v))} " for k, v in (env or {}).items())
    return "$ " + prefix + shlex.join(shown)


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        for argv in (["docker", "info"], ["docker", "compose", "version"]):
            done = subprocess.run(argv, capture_output=True, timeout=20, check=False)
            if done.returncode != 0:
                return False
    except subprocess.TimeoutExpired:
        return False
    return True


def pick_engine() -> str:
    chosen = os.environ.get("HIGHWATER_COMPOSE_ENGINE", "")
    if chosen in ("docker", "podman"):
        return chosen
    if chosen:
        raise Failed(f"HIGHWATER_COMPOSE_ENGINE={chosen}: say docker or podman")
    return "docker" if _docker_answers() else "podman"


# --- Docker Compose: the daemon runs the health checks ------------------------------------------


def _docker(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    argv = ["docker", "compose", "-f", str(COMPOSE_FILES[0]), *args]
    _say(_typed(argv))
    done = subprocess.run(argv, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise Failed(f"`{shlex.join(argv)}` exited {done.returncode}")
    return done


def _docker_health() -> dict[str, str]:
    health = {}
    for service in SERVICES:
        ids = subprocess.run(
            ["docker", "compose", "-f", str(COMPOSE_FILES[0]), "ps", "-q", service],
            capture_output=True, text=True, timeout=60, check=False,
        ).stdout.split()  # fmt: skip
        state = "missing"
        if ids:
            state = subprocess.run(
                ["docker", "inspect", "--format", "{{.State.Health.Status}}", ids[0]],
                capture_output=True, text=True, timeout=60, check=False,
            ).stdout.strip() or "unknown"  # fmt: skip
        health[service] = state
    return health


# --- podman-compose: the compose test's recipe ---------------------------------------------------


def _podman_project() -> ComposeProject:
    podman_compose = find_podman_compose()
    if shutil.which("podman") is None:
        raise Failed(
            "no Docker daemon answers and podman is not installed: `make containers` installs "
            "podman, runc and debootstrap from apt (or install Docker and its compose plugin)"
        )
    if podman_compose is None:
        raise Failed("podman-compose is not installed: `make compose-up` puts it in .venv")
    return ComposeProject(PROJECT, podman_compose)


def _podman_env_shown() -> dict[str, str]:
    conf = str(ROOT / "tests/compose/containers.conf")
    return {"CONTAINERS_CONF": conf, "BUILDAH_FORMAT": "docker"}


def _podman_compose(project: ComposeProject, *args: str, timeout_s: float) -> str:
    _say(_typed([*project.argv, *args], _podman_env_shown()))
    try:
        done = project.compose(*args, timeout_s=timeout_s)
    except (RuntimeError, TimeoutError) as exc:
        raise Failed(without_engine_noise(str(exc))) from None
    return without_engine_noise(done.stdout + done.stderr).strip()


def _podman_health(project: ComposeProject) -> dict[str, str]:
    """Each service's state, its health check run now where it is running."""
    found = project.containers()
    health = {}
    for service in SERVICES:
        if service not in found:
            health[service] = "missing"
            continue
        state = project.podman(
            "inspect", "--format", "{{.State.Status}}", found[service], check=False
        ).stdout.strip()
        if state != "running":
            health[service] = state or "unknown"
            continue
        health[service] = "healthy" if project.healthy(service) else "unhealthy"
    return health


def _podman_up(project: ComposeProject) -> None:
    try:
        ensure_images(log=_say)
    except EngineUnavailable as exc:
        raise Failed(f"the container engine cannot run here: {exc}") from None
    if not project.containers():
        ports = [*PUBLISHED_PORTS.values(), *METRICS_PORTS.values()]
        busy = [str(port) for port in ports if port_in_use(port)]
        if busy:
            raise Failed(
                f"host ports {', '.join(busy)} are in use: docker-compose.yml publishes "
                "19092-19094 and 9644-9646 (is `make up`'s cluster or the compose test running?)"
            )
    build_flags = "--network host"
    build_args: list[str] = []
    if HOST_CA_BUNDLE.exists():
        build_flags += f" --volume {HOST_CA_BUNDLE}:/host-ca.crt:ro"
        build_args = ["--build-arg", "PIP_CERT=/host-ca.crt"]
    started = time.monotonic()
    _podman_compose(
        project, "--podman-build-args", build_flags, "build", *build_args, "broker-1",
        timeout_s=BUILD_S,
    )  # fmt: skip
    _say(f"  built highwater:dev in {time.monotonic() - started:.0f} s")
    _say(_podman_compose(project, "up", "-d", timeout_s=UP_S))
    _say(f"running the health checks until each passes (at most {HEALTHY_S} s) ...")
    try:
        passed = project.wait_healthy(SERVICES, HEALTHY_S)
    except TimeoutError as exc:
        raise Failed(f"{exc}; see `make compose-status` and `podman logs CONTAINER`") from None
    _say("  healthy after: " + ", ".join(f"{s} {t:.1f} s" for s, t in passed.items()))
    _say(project.status_table().rstrip())


# --- the commands ---------------------------------------------------------------------------------


def up() -> None:
    engine = pick_engine()
    _say(f"engine: {'Docker Compose' if engine == 'docker' else 'podman-compose'}")
    if engine == "docker":
        _docker("up", "-d", "--build", timeout_s=BUILD_S + UP_S)
        wait_for(
            "every service healthy",
            lambda: all(s == "healthy" for s in _docker_health().values()),
            HEALTHY_S,
        )
    else:
        _podman_up(_podman_project())
    pages = " ".join(f"http://127.0.0.1:{port}/" for port in METRICS_PORTS.values())
    for line in (
        "",
        "Highwater is up: ZooKeeper and brokers 1-3 in containers, every health check passed.",
        f"  brokers, from this host:  {BOOTSTRAP}",
        "  inside the compose network: broker-1:9092,broker-2:9092,broker-3:9092",
        f"  status pages:  {pages}  (Prometheus: /metrics)",
        "Next:",
        f"  export HIGHWATER_BOOTSTRAP={BOOTSTRAP}",
        "  .venv/bin/highwater cluster describe",
        "  make compose-status    # runs every health check now",
        "  make compose-down      # keeps the data; make compose-down ARGS=--volumes deletes it",
    ):
        _say(line)


def status() -> int:
    engine = pick_engine()
    if engine == "docker":
        health = _docker_health()
        project = None
    else:
        project = _podman_project()
        health = _podman_health(project)
    _say(f"{'SERVICE':<10} {'HEALTH':<10} CHECK SAYS")
    for service, state in health.items():
        checked = project is not None and state in ("healthy", "unhealthy")
        said = project.health_output(service) if project is not None and checked else ""
        _say(f"{service:<10} {state:<10} {said}")
    return 0 if all(state == "healthy" for state in health.values()) else 1


def down(volumes: bool) -> None:
    # The brokers first: each closes its ZooKeeper session, so the next `up` need not wait
    # zookeeper.session.timeout.ms for old registrations to expire (docs/operations.md).
    remove = ["down", *(["-v"] if volumes else [])]
    if pick_engine() == "docker":
        _docker("stop", *BROKERS, timeout_s=STOP_S)
        _docker(*remove, timeout_s=STOP_S)
        return
    project = _podman_project()
    if not project.containers():
        _say(f"no containers of project {PROJECT}")
    elif any(project.containers().get(b) for b in BROKERS):
        _say(_podman_compose(project, "stop", *BROKERS, timeout_s=STOP_S))
    removed = _podman_compose(project, *remove, timeout_s=STOP_S)
    # podman-compose removes every container and the pod by name, whether it exists or not.
    _say("\n".join(line for line in removed.splitlines() if not _ABSENT.match(line)))
    if volumes:
        _say("volumes left: " + (" ".join(project.volumes()) or "none"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="docker-compose.yml with Docker or podman")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="build the image, start every service, wait until healthy")
    commands.add_parser("status", help="run every health check now (exit 0: all healthy)")
    remove = commands.add_parser("down", help="stop the brokers, then remove the containers")
    remove.add_argument("-v", "--volumes", action="store_true", help="delete the data too")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up()
        elif args.command == "status":
            return status()
        else:
            down(args.volumes)
    except (Failed, TimeoutError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
