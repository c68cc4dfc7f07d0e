"""Consumer groups of Kafka clients on the Kafka listener (classic JoinGroup/SyncGroup hosted in
the KIP-848 coordinator, docs/kafka.md "Consumer groups"): kcat -G, confluent-kafka members
with each assignor and one killed, a group mixing a `highwater consume` member with a Kafka
client, and the AdminClient's group calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from tests.integration.cluster_harness import Cluster, wait_until
from tests.integration.kafka_wire_cluster import (
    CLI,
    DEADLINE_S,
    KCAT,
    cli,
    create_topic,
    kafka_bootstrap,
    kafka_cluster,
)
from tests.integration.replication_checks import whole_cluster_around

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with kafka_cluster(zookeeper.port, tmp_path_factory.mktemp("kafka-groups")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


def produce(cluster: Cluster, topic: str, partitions: int, per_partition: int, start: int) -> None:
    for p in range(partitions):
        lines = "".join(f"{p}-{i}\n" for i in range(start, start + per_partition))
        cli(cluster, "produce", topic, "-p", str(p), stdin=lines.encode())


def describe(cluster: Cluster, group: str) -> dict[str, Any]:
    """`groups describe --json`: the members with their assignments, and committed offsets
    (none of either before the first member has joined)."""
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    env["HIGHWATER_BOOTSTRAP"] = cluster.bootstrap
    result = subprocess.run(
        [*CLI, "groups", "describe", group, "--json"],
        capture_output=True,
        env=env,
        timeout=DEADLINE_S,
    )
    if result.returncode != 0 and b"does not exist" in result.stderr:
        return {"state": "Dead", "members": [], "offsets": []}
    assert result.returncode == 0, result.stderr.decode()
    described: dict[str, Any] = json.loads(result.stdout)[0]
    return described


def owners(described: dict[str, Any]) -> dict[int, list[str]]:
    """Partition -> the members the coordinator has it assigned to."""
    found: dict[int, list[str]] = {}
    for member in described.get("members") or []:
        for _, partition in member["assignment"]:
            found.setdefault(partition, []).append(member["member_id"])
    return found


def committed(described: dict[str, Any]) -> dict[int, int]:
    return {
        o["partition"]: o["current_offset"]
        for o in described.get("offsets") or []
        if o.get("current_offset") is not None
    }


def records_in(*paths: Path) -> set[tuple[int, int]]:
    seen = set()
    for path in paths:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if "p" in entry:
                seen.add((entry["p"], entry["o"]))
    return seen


def start_member(cluster: Cluster, topic: str, group: str, assignor: str, out: Path) -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.kafka_group_member",
            kafka_bootstrap(cluster),
            topic,
            group,
            assignor,
            str(out),
        ],
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_members_share_partitions_and_survive_one_killed(
    cluster: Cluster, tmp_path: Path, assignor: str
) -> None:
    topic, group = f"kg-{assignor}", f"g-{assignor}"
    create_topic(cluster, topic, partitions=6)
    produce(cluster, topic, 6, 50, 0)
    outs = [tmp_path / f"member-{i}.jsonl" for i in range(3)]
    members = [start_member(cluster, topic, group, assignor, out) for out in outs]
    high: dict[int, int] = {}

    def check_invariants() -> dict[str, Any]:
        described = describe(cluster, group)
        doubled = {p: m for p, m in owners(described).items() if len(m) > 1}
        assert not doubled, f"partitions owned twice: {doubled}"
        for p, offset in committed(described).items():
            assert offset >= high.get(p, 0), f"partition {p}'s commit went back to {offset}"
            high[p] = offset
        return described

    def spread(count: int) -> bool | None:
        described = check_invariants()
        sizes = [len(m["assignment"]) for m in described.get("members") or []]
        return (len(sizes) == count and sorted(sizes) == [6 // count] * count) or None

    try:
        wait_until(lambda: spread(3), DEADLINE_S, "3 members with 2 partitions each")
        members[0].send_signal(signal.SIGKILL)  # no LeaveGroup: its session runs out
        members[0].wait(10)
        wait_until(lambda: spread(2), DEADLINE_S, "the 2 survivors with 3 partitions each")
        produce(cluster, topic, 6, 50, 50)
        every = {(p, o) for p in range(6) for o in range(100)}

        def all_read() -> bool | None:
            check_invariants()
            return every <= records_in(*outs) or None

        wait_until(all_read, DEADLINE_S, "every record read by some member")
        wait_until(
            lambda: committed(check_invariants()) == dict.fromkeys(range(6), 100) or None,
            DEADLINE_S,
            "every partition committed to its end",
        )
    finally:
        for member in members:
            if member.poll() is None:
                member.terminate()
                member.wait(20)


def test_kcat_group_splits_the_topic_and_resumes_from_committed_offsets(
    cluster: Cluster, tmp_path: Path
) -> None:
    assert KCAT is not None
    create_topic(cluster, "kg-kcat", partitions=4)
    produce(cluster, "kg-kcat", 4, 25, 0)
    # (kcat's -o would override the committed offsets in -G mode: auto.offset.reset instead)
    args = [KCAT, "-b", kafka_bootstrap(cluster), "-G", "kcat-group"]
    args += ["-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200"]
    args += ["-f", "%p %o\\n", "kg-kcat"]
    outs = [(tmp_path / f"kcat-{i}.out").open("wb") for i in range(2)]
    processes = [subprocess.Popen(args, stdout=out, stderr=subprocess.DEVNULL) for out in outs]
    try:

        def split() -> bool | None:
            described = describe(cluster, "kcat-group")
            sizes = sorted(len(m["assignment"]) for m in described.get("members") or [])
            done = committed(described) == dict.fromkeys(range(4), 25)
            return (sizes == [2, 2] and done) or None

        wait_until(split, DEADLINE_S, "two kcat members with 2 partitions each, all committed")
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
            process.wait(20)
        for out in outs:
            out.close()
    read = set()
    for i in range(2):
        for line in (tmp_path / f"kcat-{i}.out").read_text().splitlines():
            p, o = line.split()
            read.add((int(p), int(o)))
    assert read == {(p, o) for p in range(4) for o in range(25)}
    # a new member starts from the group's committed offsets: only the new records
    produce(cluster, "kg-kcat", 4, 5, 25)
    again = subprocess.run(
        [*args[:-3], "-e", "-f", "%p %o\\n", "kg-kcat"], capture_output=True, timeout=DEADLINE_S
    )
    lines = {tuple(map(int, line.split())) for line in again.stdout.decode().splitlines()}
    assert lines == {(p, o) for p in range(4) for o in range(25, 30)}


def test_a_group_mixes_highwater_and_kafka_members(cluster: Cluster, tmp_path: Path) -> None:
    create_topic(cluster, "kg-mixed", partitions=4)
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    env["HIGHWATER_BOOTSTRAP"] = cluster.bootstrap
    ours = subprocess.Popen(
        [*CLI, "consume", "kg-mixed", "--group", "mixed", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    theirs = start_member(cluster, "kg-mixed", "mixed", "range", tmp_path / "kafka.jsonl")
    try:

        def both() -> dict[str, int] | None:
            described = describe(cluster, "mixed")
            members = described.get("members") or []
            by_client = {m["client_id"]: len(m["assignment"]) for m in members}
            return by_client if by_client == {"highwater-cli": 2, "rdkafka": 2} else None

        wait_until(both, DEADLINE_S, "a highwater member and a Kafka member, 2 partitions each")
        text = cli(cluster, "groups", "describe", "mixed", "--members").stdout.decode()
        assert "highwater-cli" in text and "rdkafka" in text
    finally:
        for process in (ours, theirs):
            process.terminate()
            process.wait(20)


def test_admin_client_lists_describes_and_deletes_groups(cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    create_topic(cluster, "kg-admin", partitions=2)
    member = start_member(cluster, "kg-admin", "admin-group", "range", tmp_path / "m.jsonl")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    try:

        def described() -> Any:
            (future,) = admin.describe_consumer_groups(["admin-group"]).values()
            group = future.result()
            return group if group.state == ConsumerGroupState.STABLE and group.members else None

        group = wait_until(described, DEADLINE_S, "the group described as stable")
        assert all(m.assignment.topic_partitions for m in group.members)
        listed = admin.list_consumer_groups().result().valid
        assert "admin-group" in {g.group_id for g in listed}
    finally:
        member.terminate()
        member.wait(20)
    wait_until(
        lambda: describe(cluster, "admin-group")["state"] == "Empty" or None,
        DEADLINE_S,
        "the group empty once its member left",
    )
    (future,) = admin.delete_consumer_groups(["admin-group"]).values()
    future.result(timeout=DEADLINE_S)
    listed = admin.list_consumer_groups().result().valid
    assert "admin-group" not in {g.group_id for g in listed}
