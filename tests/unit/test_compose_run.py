"""`make compose-up`'s choice of engine (tests/compose/run.py), with stand-in `docker` commands:
Docker Compose only where a Docker daemon answers, podman-compose otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.compose import run


def _fake_docker(directory: Path, info_exit: int, compose_exit: int = 0) -> None:
    script = directory / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = info ] && exit {info_exit}\n'
        f'[ "$1" = compose ] && exit {compose_exit}\n'
        "exit 3\n"
    )
    script.chmod(0o755)


@pytest.fixture
def path_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is tmp_path alone (a `docker` written there is the only one); no engine chosen."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HIGHWATER_COMPOSE_ENGINE", raising=False)
    return tmp_path


def test_podman_without_a_docker_command(path_only: Path) -> None:
    assert run.pick_engine() == "podman"


def test_podman_when_the_docker_client_finds_no_daemon(path_only: Path) -> None:
    _fake_docker(path_only, info_exit=1)  # "Cannot connect to the Docker daemon"
    assert run.pick_engine() == "podman"


def test_podman_when_docker_has_no_compose_plugin(path_only: Path) -> None:
    _fake_docker(path_only, info_exit=0, compose_exit=1)  # "unknown command: docker compose"
    assert run.pick_engine() == "podman"


def test_docker_when_its_daemon_answers(path_only: Path) -> None:
    _fake_docker(path_only, info_exit=0)
    assert run.pick_engine() == "docker"


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_the_environment_picks_either(
    path_only: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    monkeypatch.setenv("HIGHWATER_COMPOSE_ENGINE", engine)
    assert run.pick_engine() == engine


def test_an_unknown_engine_is_refused(path_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIGHWATER_COMPOSE_ENGINE", "lxc")
    with pytest.raises(run.Failed, match="say docker or podman"):
        run.pick_engine()


def test_commands_are_shown_as_typed_from_the_repository() -> None:
    shown = run._typed(
        [f"{os.sep}venv{os.sep}bin{os.sep}podman-compose", "-f", str(run.ROOT / "x.yml"), "up"],
        {"CONTAINERS_CONF": str(run.ROOT / "tests/compose/containers.conf"), "A": "b c"},
    )
    assert shown == (
        "$ CONTAINERS_CONF=tests/compose/containers.conf A='b c' podman-compose -f x.yml up"
    )


@pytest.mark.parametrize(
    ("line", "absent"),
    [
        (
            'Error: no container with name or ID "highwater_broker-1_1" found: no such container',
            True,
        ),
        ("Error: no pod with name or ID pod_highwater found: no such pod", True),
        ("Error: volume highwater_broker-1-data is being used", False),
    ],
)
def test_down_hides_only_removals_of_what_was_not_there(line: str, absent: bool) -> None:
    assert bool(run._ABSENT.match(line)) is absent
