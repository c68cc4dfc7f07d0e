"""docker-compose.yml and the Dockerfile, checked without a container engine.

The compose file is parsed by a small parser for the YAML subset it is written in (block
mappings and sequences, JSON-style flow sequences and quoted strings, full-line comments);
when PyYAML is installed the two parsers must agree. Broker commands are parsed by the real
CLI, and the brokers' settings by the real broker config loader. The real thing (build, up,
produce, consume, stop a broker, down and up) is tests/integration/test_compose_cluster.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest

from broker.config.broker_config import KNOWN_KEYS, load_config
from broker.config.config_def import parse_metrics_listener
from broker.healthcheck import broker_args_from_cmdline
from client.cli.main import main
from tests.compose import images

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
OVERRIDE = ROOT / "tests/compose/docker-compose.local-images.yml"
BROKERS = ("broker-1", "broker-2", "broker-3")


# --- a parser for the YAML subset docker-compose.yml uses -----------------------------------


def _scalar(text: str) -> Any:
    if text[:1] in ('"', "[", "{"):
        return json.loads(text)
    if text in ("true", "false"):
        return text == "true"
    if text in ("null", "~"):
        return None
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    if text[:1] in ("'", "&", "*", "!", "|", ">") or " #" in text:
        raise ValueError(f"outside the supported YAML subset: {text!r}")
    return text


def parse_yaml_subset(text: str) -> Any:
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            if "\t" in raw[: len(raw) - len(raw.lstrip())]:
                raise ValueError("tabs in indentation")
            lines.append((len(raw) - len(raw.lstrip(" ")), stripped))

    def value_at(i: int, text: str) -> tuple[Any, int]:
        """A scalar or flow collection starting with `text` on line i; flows may span lines."""
        while text[:1] in ("[", "{"):
            try:
                return json.loads(text), i + 1
            except ValueError:
                i += 1
                if i >= len(lines):
                    raise
                text += " " + lines[i][1]
        return _scalar(text), i + 1

    def block(i: int, indent: int) -> tuple[Any, int]:
        if lines[i][1].startswith("- "):
            items: list[Any] = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                item, i = value_at(i, lines[i][1][2:].strip())
                items.append(item)
            return items, i
        mapping: dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, colon, rest = lines[i][1].partition(":")
            if not colon or (rest and not rest.startswith(" ")):
                raise ValueError(f"expected 'key: value', got {lines[i][1]!r}")
            if key in mapping:
                raise ValueError(f"duplicate key {key!r}")
            rest = rest.strip()
            if rest:
                mapping[key], i = value_at(i, rest)
            elif i + 1 < len(lines) and lines[i + 1][0] > indent:
                mapping[key], i = block(i + 1, lines[i + 1][0])
            else:
                mapping[key], i = None, i + 1
        return mapping, i

    parsed, end = block(0, lines[0][0])
    if end != len(lines):
        raise ValueError(f"unexpected indentation at {lines[end][1]!r}")
    return parsed


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    parsed = parse_yaml_subset(COMPOSE.read_text())
    assert isinstance(parsed, dict)
    return parsed


def test_the_subset_parser_agrees_with_pyyaml(compose: dict[str, Any]) -> None:
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(COMPOSE.read_text()) == compose
    assert yaml.safe_load(OVERRIDE.read_text()) == parse_yaml_subset(OVERRIDE.read_text())


def test_subset_parser_reads_nesting_and_flows() -> None:
    text = 'a:\n  b: [1,\n    "x"]\n  c:\n    - "p:q"\n    - plain\nd: 5s\ne:\n'
    assert parse_yaml_subset(text) == {
        "a": {"b": [1, "x"], "c": ["p:q", "plain"]},
        "d": "5s",
        "e": None,
    }
    with pytest.raises(ValueError, match="duplicate"):
        parse_yaml_subset("a: 1\na: 2\n")


# --- the compose file -----------------------------------------------------------------------


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    service = compose["services"][name]
    assert isinstance(service, dict)
    return service


def _overrides(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--override"]


def _cli_accepts(argv: list[str]) -> None:
    """Parse argv with the real `highwater` command tree (no command runs)."""
    command: click.Command = main
    ctx = click.Context(main, info_name="highwater")
    while isinstance(command, click.Group):
        name, argv = argv[0], argv[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"no command {name!r} under {command.name}"
        command = sub
    command.make_context(command.name, list(argv), parent=ctx)


def test_services_are_zookeeper_and_three_brokers(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"zookeeper", *BROKERS}
    zookeeper = _service(compose, "zookeeper")
    assert zookeeper["image"].startswith("zookeeper:3.8")
    for name in BROKERS:
        broker = _service(compose, name)
        assert broker["build"] == "."
        assert broker["hostname"] == name
        assert broker["depends_on"] == {"zookeeper": {"condition": "service_healthy"}}


def test_every_service_has_a_health_check(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD", name
        if name in BROKERS:
            # The image's own check (the Dockerfile's HEALTHCHECK), spelled out for engines
            # that ignore it.
            assert test == ["CMD", "python", "-m", "broker.healthcheck"]
    zookeeper = compose["services"]["zookeeper"]["healthcheck"]["test"]
    # Works in the official image and in the local stand-in alike: bash, no zkServer.sh.
    assert zookeeper[1:3] == ["bash", "-c"]
    assert "srvr" in zookeeper[3]


def test_the_health_check_finds_each_brokers_settings_in_its_command_line(
    compose: dict[str, Any],
) -> None:
    for name in BROKERS:
        command = _service(compose, name)["command"]
        # The image's entry point is `highwater`; the container's PID 1 runs it with `command`.
        found = broker_args_from_cmdline(
            ["/usr/local/bin/python", "/usr/local/bin/highwater", *command]
        )
        assert found is not None, name
        assert found.config_path is None
        config = load_config(None, found.overrides)
        assert config.broker_id == int(name.removeprefix("broker-"))


def test_services_restart_and_brokers_stop_gracefully(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        # Engines that ignore depends_on's condition start brokers before ZooKeeper answers:
        # a broker that gives up waiting exits and is started again.
        assert service["restart"] == "unless-stopped", name
    for name in BROKERS:
        assert _service(compose, name)["stop_grace_period"] == "30s"


def test_broker_commands_use_real_flags_and_config_keys(compose: dict[str, Any]) -> None:
    for name in BROKERS:
        command = _service(compose, name)["command"]
        assert command[0] == "broker"
        _cli_accepts(command)
        overrides = _overrides(command)
        assert {o.partition("=")[0] for o in overrides} <= KNOWN_KEYS
        config = load_config(None, overrides)  # validates every value
        assert config.broker_id == int(name.removeprefix("broker-"))
        assert config.zookeeper_connect.partition(":")[0] == "zookeeper"


def _published(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port, for every published port."""
    return {container: host for container, (_, host) in _bindings(service).items()}


def _bindings(service: dict[str, Any]) -> dict[int, tuple[str, int]]:
    """Container port -> (host address, "" for every interface; host port)."""
    out = {}
    for mapping in service["ports"]:
        *address, host, container = str(mapping).split(":")
        out[int(container)] = (":".join(address), int(host))
    return out


def test_each_broker_has_an_internal_and_a_published_external_listener(
    compose: dict[str, Any],
) -> None:
    for name in BROKERS:
        service = _service(compose, name)
        config = load_config(None, _overrides(service["command"]))
        listeners = {x.name: x for x in config.all_listeners()}
        container_port = listeners["EXTERNAL"].port
        host_port = _published(service)[container_port]
        # INTERNAL: the compose network's (brokers, the health check, clients run inside);
        # EXTERNAL: published on the same host port and advertised as 127.0.0.1, so a host
        # client needs no /etc/hosts edits (see the top of docker-compose.yml).
        internal, external = listeners["INTERNAL"], listeners["EXTERNAL"]
        assert config.inter_broker_listener_name == "INTERNAL"
        assert (internal.advertised_host, internal.advertised_port) == (name, 9092)
        assert (external.advertised_host, external.advertised_port) == ("127.0.0.1", host_port)
        assert external.port == container_port == host_port
        assert internal.host == external.host == "0.0.0.0"
        bootstrap = service["environment"]["HIGHWATER_BOOTSTRAP"]
        assert f"{name}:9092" in bootstrap.split(",")


def test_each_brokers_metrics_listener_is_published_on_the_same_port(
    compose: dict[str, Any],
) -> None:
    for number, name in enumerate(BROKERS, 1):
        service = _service(compose, name)
        config = load_config(None, _overrides(service["command"]))
        assert config.metrics_listener is not None, f"{name} has no metrics.listener"
        host, port = parse_metrics_listener(config.metrics_listener)
        # Every interface, so the published port reaches it; 9644.. as `highwater dev up`'s.
        assert (host, port) == ("0.0.0.0", 9643 + number)
        # Published on the host's loopback only: the page shows every topic and group to
        # whoever reaches it.
        assert _bindings(service)[port] == ("127.0.0.1", port)
        # The EXTERNAL listener and the metrics listener, nothing else.
        external = next(x for x in config.all_listeners() if x.name == "EXTERNAL")
        assert set(_published(service)) == {external.port, port}


def test_published_ports_are_unique(compose: dict[str, Any]) -> None:
    published = [
        host
        for service in compose["services"].values()
        if service.get("ports")
        for _, host in _bindings(service).values()
    ]
    assert published and len(published) == len(set(published))


def test_data_lives_in_named_volumes(compose: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    used = set()
    for name, service in compose["services"].items():
        for mount in service["volumes"]:
            volume, _, target = mount.partition(":")
            assert volume in declared, f"{name}: {volume} is not a named volume"
            used.add(volume)
            if name in BROKERS:
                config = load_config(None, _overrides(service["command"]))
                assert [str(d) for d in config.log_dirs] == [target]
    assert used == declared
    assert len(used) == 2 + len(BROKERS)  # no two services share a data volume


def test_dockerfile_builds_from_python_with_constraints() -> None:
    text = DOCKERFILE.read_text()
    # The base image is a build argument (the compose test swaps in a local stand-in).
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim$", text, re.MULTILINE)
    froms = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert froms == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    assert "-c constraints.txt" in text
    for package in ("protocol", "broker", "controller", "client"):
        assert re.search(rf"^COPY {package} ", text, re.MULTILINE), package
    assert 'ENTRYPOINT ["highwater"]' in text
    # Paths the compose file mounts are created (and owned) in the image.
    assert "/var/lib/highwater/data" in text


def _final_stage(text: str) -> str:
    return text[text.rindex("\nFROM ") :]


def test_the_image_holds_the_installed_package_only_and_runs_unprivileged() -> None:
    text = DOCKERFILE.read_text()
    final = _final_stage(text)
    # Sources, tests and build tools stay in the build stage: only pip's installed tree moves.
    assert re.findall(r"^COPY .*", final, re.MULTILINE) == ["COPY --from=build /install/ /"]
    assert re.search(r"^USER highwater$", final, re.MULTILINE)
    assert re.search(
        r"^HEALTHCHECK .*\n?.*CMD \[\"python\", \"-m\", \"broker.healthcheck\"\]", final, re.M
    )
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert {"tests", "docs", ".venv", ".git"} <= set(dockerignore)


def test_the_pip_ca_bundle_is_an_optional_build_argument() -> None:
    text = DOCKERFILE.read_text()
    # Declared (a RUN sees only declared build arguments), with no default: unset unless given.
    assert re.search(r"^ARG PIP_CERT$", text, re.MULTILINE)
    assert "PIP_CERT=" not in text.replace("--build-arg PIP_CERT=", "")


def test_the_test_override_swaps_base_images_and_nothing_else(compose: dict[str, Any]) -> None:
    override = parse_yaml_subset(OVERRIDE.read_text())
    assert set(override) == {"services"}
    services = override["services"]
    assert set(services) == set(compose["services"])
    assert services["zookeeper"] == {"image": images.ZOOKEEPER_IMAGE}
    for name in BROKERS:
        assert services[name] == {
            "build": {"context": ".", "args": {"BASE_IMAGE": images.PYTHON_IMAGE}}
        }


def test_the_flag_check_rejects_what_the_cli_rejects() -> None:
    with pytest.raises(click.UsageError):
        _cli_accepts(["broker", "--no-such-flag"])
    with pytest.raises(click.UsageError):
        _cli_accepts(["cluster", "describe", "--bootstrap-server", "no-port"])
