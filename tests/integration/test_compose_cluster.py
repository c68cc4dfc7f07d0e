"""docker-compose.yml for real: build, up, health, produce and consume from the host, lose a
broker, get it back, down and up with the volumes kept, down -v.

Exactly what a user does, with podman-compose (no Docker daemon on our machines) and one small
override file that swaps in locally built stand-ins for the two base images (image registries
are unreachable here: tests/compose/images.py). What differs from a user's machine, and why:

- the engine is configured by tests/compose/containers.conf (runc, ulimits within this
  machine's hard limits, no systemd);
- podman 4.3 without systemd never runs health checks by itself, so the test runs them
  (`podman healthcheck run`) until each passes;
- the image build gets `--network host` and the host's CA bundle (PIP_CERT) for pip;
- nothing for the host client: it bootstraps from the published EXTERNAL listeners
  (127.0.0.1:1909N), as a user's would, with no /etc/hosts line.

Skipped only when the container engine cannot run here (no podman, not root); in CI, where
`make test` installs everything, a missing piece is a failure.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compose.harness import (
    BROKERS,
    METRICS_PORTS,
    PUBLISHED_PORTS,
    ComposeProject,
    HostClient,
    Timed,
    find_podman_compose,
    port_in_use,
    wait_for,
    without_engine_noise,
)
from tests.compose.images import EngineUnavailable, ensure_images

pytestmark = [
    pytest.mark.integration,
    # The steps have their own deadlines; this bounds a first run that also builds the base
    # images (about two minutes; `make test` builds them beforehand).
    pytest.mark.timeout(900),
]

PROJECT = "highwater-compose-test"
TOPIC = "compose-roundtrip"
PARTITIONS = 6
RECORDS = 10_000
KEYS = 100
SERVICES = ("zookeeper", *BROKERS)
STOP_GRACE_PERIOD_S = 30  # docker-compose.yml's stop_grace_period for brokers
# `down` stops every container at once (podman-compose; Docker Compose stops the brokers at once,
# then ZooKeeper). A broker bounds its controlled shutdown (controlled.shutdown.timeout.ms) and
# gives it up when ZooKeeper goes (docs/operations.md, "Stopping"), so `down` stops every broker
# cleanly within the grace period; False would only check that the records survive a kill.
DOWN_IS_CLEAN = True

# Deadlines per step.
BUILD_S = 600
UP_S = 120
HEALTHY_S = 120
CLI_S = 120
STOP_S = STOP_GRACE_PERIOD_S + 30
ISR_S = 90
DOWN_S = 120


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must be able to run the compose test: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeProject]:
    podman_compose = find_podman_compose()
    if podman_compose is None:
        _unavailable("podman-compose is not installed (the dev extra pins it)")
    try:
        ensure_images(log=lambda line: print(line, flush=True))
    except EngineUnavailable as exc:
        _unavailable(f"the container engine cannot run here: {exc}")
    assert podman_compose is not None
    project = ComposeProject(PROJECT, podman_compose)
    leftovers = project.destroy()  # from an earlier run that was killed before its clean-up
    if leftovers:
        print(f"removed leftovers of an earlier run: {', '.join(leftovers)}")
    ports = [*PUBLISHED_PORTS.values(), *METRICS_PORTS.values()]
    busy = [f"{p}" for p in ports if port_in_use(p)]
    if busy:
        pytest.fail(
            f"host ports {', '.join(busy)} are in use; docker-compose.yml publishes 19092-19094 "
            "and the metrics listeners' 9644-9646 (on 127.0.0.1) "
            "(is `make up`'s cluster or another compose cluster running?)",
            pytrace=False,
        )
    try:
        yield project
    finally:
        project.destroy()


def _records() -> list[tuple[str, str]]:
    return [(f"key-{i % KEYS:03d}", f"value-{i:05d}") for i in range(RECORDS)]


def _consume_all(client: HostClient) -> list[tuple[int, int, str, str]]:
    """(partition, offset, key, value) of every record, from the beginning to the end, sorted
    (partitions are read concurrently, so their records interleave differently each time)."""
    out = client.run(
        "consume", TOPIC, "--from-beginning", "-e", "--format", r"%p\t%o\t%k\t%s\n",
        timeout_s=CLI_S,
    )  # fmt: skip
    rows = []
    for line in out.splitlines():
        partition, offset, key, value = line.split("\t")
        rows.append((int(partition), int(offset), key, value))
    return sorted(rows)


def _check_round_trip(consumed: list[tuple[int, int, str, str]]) -> None:
    """Every record once; each key in one partition, its values in the order produced."""
    assert sorted((k, v) for _, _, k, v in consumed) == sorted(_records())
    by_key: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for partition, offset, key, value in consumed:
        by_key[key].append((partition, offset, value))
    for key, seen in by_key.items():
        assert len({p for p, _, _ in seen}) == 1, f"{key} is in several partitions"
        values = [v for _, _, v in sorted(seen)]
        assert values == sorted(values), f"{key}: values out of produce order"


def _isr_whole(client: HostClient) -> list[dict[str, Any]] | None:
    partitions = client.describe_topic(TOPIC)
    whole = all(
        p["leader"] in p["replicas"] and sorted(p["isr"]) == sorted(p["replicas"])
        for p in partitions
    )
    return partitions if whole else None


def _json_lines_only(stdout: str) -> int:
    lines = [line for line in stdout.splitlines() if line.strip()]
    for line in lines:
        json.loads(line)  # raises on anything but one JSON document per line
    return len(lines)


def test_compose_cluster_round_trip(
    compose: ComposeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    report: list[str] = []
    try:
        _scenario(compose, HostClient(), report)
    except BaseException:
        print("\n".join(report))
        print(compose.dump_logs())
        raise
    with capsys.disabled():
        print("\n" + "\n".join(report))


def _scenario(compose: ComposeProject, client: HostClient, report: list[str]) -> None:
    started = time.monotonic()
    timed = Timed()

    # --- build the image from the repository's Dockerfile, as `docker compose build` does ---
    timed.run("build (podman-compose build)", lambda: compose.build(BUILD_S))
    image = json.loads(compose.podman("image", "inspect", "highwater:dev").stdout)[0]
    config = image["Config"]
    assert config["User"] == "highwater"
    assert image["Healthcheck"]["Test"] == ["CMD", "python", "-m", "broker.healthcheck"]
    size_mb = image["Size"] / 1e6
    base = json.loads(
        compose.podman("image", "inspect", "localhost/highwater-test/python:3.11-slim").stdout
    )[0]
    report.append(
        f"image highwater:dev {size_mb:.0f} MB (base {base['Size'] / 1e6:.0f} MB, "
        f"Highwater and its dependencies {(image['Size'] - base['Size']) / 1e6:.0f} MB)"
    )
    installed = compose.podman(
        "run", "--rm", "--entrypoint", "python", "highwater:dev", "-c",
        "import importlib.metadata as m; print(' '.join(sorted("
        "d.metadata['Name'].lower() for d in m.distributions() if '/usr/local/' in str(d._path))))",
    ).stdout.split()  # fmt: skip
    assert "highwater" in installed
    for unwanted in ("pytest", "hypothesis", "mypy", "ruff", "pyspark", "podman-compose"):
        assert unwanted not in installed, f"{unwanted} is in the image"
    report.append(f"installed in the image: {' '.join(installed)}")

    # --- up, and every service healthy ---
    up = timed.run("up -d", lambda: compose.compose("up", "-d", timeout_s=UP_S))
    report += ["", "$ podman-compose up -d", without_engine_noise(up.stdout + up.stderr)]
    health = timed.run("all health checks pass", lambda: compose.wait_healthy(SERVICES, HEALTHY_S))
    report += [
        "",
        "health checks passed after: " + ", ".join(f"{s} {t:.1f} s" for s, t in health.items()),
    ]
    report += ["", "$ podman ps", compose.status_table().rstrip()]
    report.append(f"broker-1 health check says: {compose.health_output('broker-1')}")

    # --- from the host: an RF=3 topic, 10,000 keyed records with acks=all, consumed back ---
    report.append(f"host client: -b {client.bootstrap} (the EXTERNAL listeners, no /etc/hosts)")
    timed.run(
        "create topic (RF=3)",
        lambda: client.run(
            "topics", "create", TOPIC, "--partitions", str(PARTITIONS),
            "--replication-factor", "3", timeout_s=CLI_S,
        ),
    )  # fmt: skip
    lines = "".join(f"{k}:{v}\n" for k, v in _records())
    produce_started = time.monotonic()
    client.run("produce", TOPIC, "-K", ":", "--acks", "all", timeout_s=CLI_S, input_text=lines)
    produce_s = time.monotonic() - produce_started
    timed.steps.append(("produce 10,000 (acks=all)", produce_s))
    consume_started = time.monotonic()
    consumed = _consume_all(client)
    consume_s = time.monotonic() - consume_started
    timed.steps.append(("consume 10,000", consume_s))
    _check_round_trip(consumed)
    report.append(
        f"round trip: produced {RECORDS} keyed records (acks=all) in {produce_s:.2f} s "
        f"({RECORDS / produce_s:,.0f}/s), consumed all {len(consumed)} back in {consume_s:.2f} s "
        f"({len(consumed) / consume_s:,.0f}/s), each CLI call a fresh process"
    )
    partitions = wait_for("an ISR of 3 everywhere", lambda: _isr_whole(client), ISR_S)

    # --- stop one broker (one that leads partitions): leadership moves, consumption goes on ---
    leaders = [p["leader"] for p in partitions]
    victim_id = max(set(leaders), key=leaders.count)
    victim = f"broker-{victim_id}"
    stop_started = time.monotonic()
    compose.compose("stop", victim, timeout_s=STOP_S)
    stop_s = time.monotonic() - stop_started
    timed.steps.append((f"stop {victim} (SIGTERM)", stop_s))
    state = compose.inspect(victim)["State"]
    out, _ = compose.logs(victim)
    assert state["ExitCode"] == 0, (
        f"{victim} exited {state['ExitCode']} (137: killed after the grace period)"
    )
    assert stop_s < STOP_GRACE_PERIOD_S
    assert '"event": "stopped cleanly"' in out
    report.append(
        f"stopped {victim} (led {leaders.count(victim_id)} of {PARTITIONS} partitions): "
        f"clean exit 0 in {stop_s:.1f} s"
    )

    def moved() -> list[dict[str, Any]] | None:
        described = client.describe_topic(TOPIC)
        ok = all(p["leader"] not in (-1, victim_id) for p in described)
        return described if ok else None

    after = timed.run(
        "leadership moved", lambda: wait_for("leaders off the stopped broker", moved, ISR_S)
    )
    report.append(f"leaders now: {[p['leader'] for p in after]} (was {leaders})")
    during = timed.run("consume with a broker down", lambda: _consume_all(client))
    assert during == consumed

    # --- start it again: it rejoins, the ISR is whole again ---
    timed.run(f"start {victim}", lambda: compose.compose("start", victim, timeout_s=UP_S))
    timed.run(f"{victim} healthy", lambda: compose.wait_healthy([victim], HEALTHY_S))
    timed.run(
        "ISR whole again",
        lambda: wait_for("the ISR whole again", lambda: _isr_whole(client), ISR_S),
    )

    # --- down and up with the named volumes kept: every record is still there ---
    volumes = compose.volumes()
    assert len(volumes) == 5, volumes
    down = timed.run("down (volumes kept)", lambda: compose.compose("down", timeout_s=DOWN_S))
    assert compose.containers() == {}
    assert compose.volumes() == volumes
    down_s = timed.steps[-1][1]
    if DOWN_IS_CLEAN:
        assert down_s < STOP_GRACE_PERIOD_S, f"down took {down_s:.0f} s: a broker was killed"
    report.append(
        f"down in {down_s:.1f} s"
        + (
            " (a broker outlived the grace period and was killed: see DOWN_IS_CLEAN)"
            if down_s >= STOP_GRACE_PERIOD_S
            else ""
        )
    )
    report += ["$ podman-compose down", without_engine_noise(down.stdout + down.stderr)]
    timed.run("up -d (again)", lambda: compose.compose("up", "-d", timeout_s=UP_S))
    timed.run("all health checks pass (again)", lambda: compose.wait_healthy(SERVICES, HEALTHY_S))
    again = timed.run("consume after down/up", lambda: _consume_all(client))
    assert again == consumed  # the same records at the same offsets
    timed.run(
        "ISR whole after down/up",
        lambda: wait_for("the ISR whole", lambda: _isr_whole(client), ISR_S),
    )

    # --- the brokers log JSON lines on stdout ---
    for broker in BROKERS:
        out, _ = compose.logs(broker)
        assert _json_lines_only(out) > 0, f"{broker} logged nothing on stdout"

    # --- down -v: nothing left ---
    timed.run("down -v", lambda: compose.compose("down", "-v", timeout_s=DOWN_S))
    assert compose.containers() == {}
    assert compose.volumes() == []

    report += ["", "steps:", *timed.lines(), f"total {time.monotonic() - started:.0f} s"]
