"""Consumer groups as users meet them, on a real 3-broker cluster: `consume --group` resumes
exactly after Ctrl-C, two members split a topic without ever sharing a partition, `groups
describe` shows the lag, `groups reset-offsets` plans then executes (and refuses while the group
is active). One cluster for the module; each test uses its own topic and group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer, RebalanceListener, TopicPartition
from client.producer import Producer
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    running_cluster,
    whole_cluster_around,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CLI = [sys.executable, "-m", "client.cli"]
DEADLINE_S = 60  # for conditions a test waits for (never a fixed sleep)
GROUPS = {
    **FAST_REPLICATION,
    "group.consumer.heartbeat.interval.ms": "300",
    "offsets.topic.num.partitions": "10",
}


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("groups"), GROUPS) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


def _env(cluster: Cluster) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    return {**env, "HIGHWATER_BOOTSTRAP": cluster.bootstrap, "PYTHONUNBUFFERED": "1"}


def cli(cluster: Cluster, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, env=_env(cluster), timeout=DEADLINE_S
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return done


def create(cluster: Cluster, topic: str, partitions: int) -> None:
    replicas = [[(p + i) % 3 + 1 for i in range(3)] for p in range(partitions)]
    trio.run(create_topic, cluster, topic, replicas)


def produce(cluster: Cluster, topic: str, values: list[bytes], partitions: int) -> None:
    async def send() -> None:
        async with Producer(cluster.bootstrap, linger_ms=5) as producer:
            for i, value in enumerate(values):
                await producer.send(topic, value, partition=i % partitions)
            await producer.flush()

    trio.run(send)


def table(stdout: bytes) -> list[list[str]]:
    return [line.split() for line in stdout.decode().splitlines()]


# -- consume --group: Ctrl-C, then a second run ----------------------------------------------


def test_a_second_consume_continues_exactly_where_ctrl_c_stopped_the_first(
    cluster: Cluster,
) -> None:
    # Enough records that the consumer cannot print them all between our SIGINT and the
    # moment it acts on it (the pipe and stdout's buffer hold ~10,000 lines; draining them
    # after the signal lets it write more): with 20,000 it sometimes finished first, and
    # with 60,000 once on a machine loaded by a chaos run beside the tests.
    topic, count = "g-resume", 200_000
    create(cluster, topic, 3)
    produce(cluster, topic, [b"%06d" % i for i in range(count)], 3)
    first = subprocess.Popen(
        [*CLI, "consume", topic, "--group", "resume", "--from-beginning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(cluster),
    )
    assert first.stdout is not None and first.stderr is not None
    # The pipe fills up (about 64 KiB): the consumer waits on us, so Ctrl-C comes mid-topic.
    printed = [first.stdout.readline() for _ in range(2_000)]
    first.send_signal(signal.SIGINT)
    printed += first.stdout.readlines()  # the rest it printed before it stopped
    assert first.wait(DEADLINE_S) == 0
    summary = first.stderr.read().decode()
    assert f"Processed a total of {len(printed)} messages" in summary, summary
    assert "Group resume committed:" in summary, summary
    assert 2_000 <= len(printed) < count
    second = cli(cluster, "consume", topic, "--group", "resume", "-e")
    assert second.returncode == 0, second.stderr.decode()
    rest = second.stdout.splitlines(keepends=True)
    everything = sorted(printed + rest)
    assert everything == [b"%06d\n" % i for i in range(count)]  # each record exactly once
    again = cli(cluster, "consume", topic, "--group", "resume", "-e")
    assert again.stdout == b"" and "Processed a total of 0 messages" in again.stderr.decode()


# -- two members ---------------------------------------------------------------------------


class Ownership(RebalanceListener):
    """A member's own log of what it owns, checked against the other member's at each
    change (both run in one trio loop, so "at the same moment" is exact)."""

    def __init__(self, name: str, all_owners: dict[str, set[TopicPartition]]) -> None:
        self.name = name
        self.owners = all_owners
        all_owners[name] = set()
        self.overlaps: list[tuple[str, set[TopicPartition]]] = []

    def _check(self) -> None:
        mine = self.owners[self.name]
        for other, theirs in self.owners.items():
            if other != self.name and mine & theirs:
                self.overlaps.append((other, mine & theirs))

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.owners[self.name] |= partitions
        self._check()

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.owners[self.name] -= partitions

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.owners[self.name] -= partitions


def test_two_members_split_the_partitions_and_never_share_one(cluster: Cluster) -> None:
    topic, count = "g-split", 6_000
    create(cluster, topic, 6)
    produce(cluster, topic, [b"%05d" % i for i in range(count)], 6)
    owners: dict[str, set[TopicPartition]] = {}
    first_log, second_log = Ownership("first", owners), Ownership("second", owners)
    seen: list[bytes] = []
    described: list[list[set[Any]]] = []
    final: dict[str, set[TopicPartition]] = {}

    async def run() -> None:
        settings: dict[str, Any] = {"group_id": "split", "auto_offset_reset": "earliest"}
        async with (
            Consumer(cluster.bootstrap, **settings) as first,
            Consumer(cluster.bootstrap, **settings) as second,
        ):
            first.subscribe([topic], listener=first_log)
            with trio.fail_after(DEADLINE_S):
                while len(seen) < count // 2:
                    seen.extend(r.value or b"" for r in await first.poll(200))
            second.subscribe([topic], listener=second_log)
            with trio.fail_after(DEADLINE_S):
                while not (len(owners["first"]) == len(owners["second"]) == 3):
                    for member in (first, second):
                        seen.extend(r.value or b"" for r in await member.poll(50))
                while len(seen) < count:
                    for member in (first, second):
                        seen.extend(r.value or b"" for r in await member.poll(50))
            final.update({name: set(owned) for name, owned in owners.items()})
            async with Admin(cluster.bootstrap) as admin:
                (group,) = await admin.describe_groups(["split"])
                described.append([set(m.assignment) for m in group.members])

    trio.run(run)
    assert first_log.overlaps == [] and second_log.overlaps == []
    assert final["first"] | final["second"] == {TopicPartition(topic, p) for p in range(6)}
    assert owners == {"first": set(), "second": set()}  # both let go on close
    first_owned, second_owned = described[0]
    assert not first_owned & second_owned and len(first_owned) == len(second_owned) == 3
    # At least once: every record seen; a partition that moved may repeat what came after its
    # last commit (auto-commit commits on revocation, so here nothing repeats).
    assert sorted(set(seen)) == [b"%05d" % i for i in range(count)]
    assert len(seen) == count


# -- groups describe, reset-offsets --------------------------------------------------------


def test_describe_shows_the_lag_and_reset_offsets_plans_then_executes(cluster: Cluster) -> None:
    topic = "g-lag"
    create(cluster, topic, 2)
    produce(cluster, topic, [b"%d" % i for i in range(100)], 2)
    read = cli(
        cluster, "consume", topic, "--group", "lag", "--from-beginning", "--max-messages", "30"
    )
    assert read.returncode == 0, read.stderr.decode()
    produce(cluster, topic, [b"more"] * 10, 2)
    described = cli(cluster, "groups", "describe", "lag", "--json")
    assert described.returncode == 0, described.stderr.decode()
    (document,) = json.loads(described.stdout)
    assert document["state"] == "Empty" and document["members"] == []
    offsets = {o["partition"]: o for o in document["offsets"]}
    assert sum(o["current_offset"] for o in offsets.values()) == 30
    assert {p: o["high_watermark"] for p, o in offsets.items()} == {0: 55, 1: 55}
    assert sum(o["lag"] for o in offsets.values()) == 110 - 30
    plain = cli(cluster, "groups", "describe", "lag")
    rows = table(plain.stdout)
    assert rows[0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "HIGH-WATERMARK", "LAG"]
    assert sum(int(row[5]) for row in rows[1:]) == 80

    dry = cli(cluster, "groups", "reset-offsets", "lag", "--topic", topic, "--to-earliest")
    assert dry.returncode == 0, dry.stderr.decode()
    assert [row[4] for row in table(dry.stdout)[1:]] == ["0", "0"]
    assert "Dry run" in dry.stderr.decode()
    unchanged = json.loads(cli(cluster, "groups", "describe", "lag", "--json").stdout)
    assert unchanged[0]["offsets"] == document["offsets"]

    done = cli(
        cluster, "groups", "reset-offsets", "lag", "--all-topics", "--shift-by", "-5", "--execute"
    )
    assert done.returncode == 0, done.stderr.decode()
    after = {
        o["partition"]: o
        for o in json.loads(cli(cluster, "groups", "describe", "lag", "--json").stdout)[0][
            "offsets"
        ]
    }
    assert {p: o["current_offset"] for p, o in after.items()} == {
        p: max(0, o["current_offset"] - 5) for p, o in offsets.items()
    }
    resumed = cli(cluster, "consume", topic, "--group", "lag", "-e")
    assert resumed.returncode == 0
    assert len(resumed.stdout.splitlines()) == 110 - sum(
        o["current_offset"] for o in after.values()
    )


def test_reset_offsets_refuses_an_active_group(cluster: Cluster) -> None:
    topic = "g-active"
    create(cluster, topic, 1)
    member = subprocess.Popen(
        [*CLI, "consume", topic, "--group", "active"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(cluster),
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            state = cli(cluster, "groups", "describe", "active", "--state")
            if state.returncode == 0 and table(state.stdout)[1][3] == "Stable":
                break
            assert time.monotonic() < deadline, state.stderr.decode()
            time.sleep(0.2)
        refused = cli(
            cluster,
            "groups",
            "reset-offsets",
            "active",
            "--topic",
            topic,
            "--to-latest",
            "--execute",
        )
        assert refused.returncode == 1
        assert "while group 'active' is inactive, but it is Stable" in refused.stderr.decode()
        deleted = cli(cluster, "groups", "delete", "active")
        assert deleted.returncode == 1 and "it has active members" in deleted.stderr.decode()
    finally:
        member.send_signal(signal.SIGINT)
        assert member.wait(DEADLINE_S) == 0
    left = cli(cluster, "groups", "describe", "active", "--state")
    assert table(left.stdout)[1][3] == "Empty"  # it left on Ctrl-C
    assert cli(cluster, "groups", "delete", "active").returncode == 0
    assert "active" not in cli(cluster, "groups", "list").stdout.decode().split()
