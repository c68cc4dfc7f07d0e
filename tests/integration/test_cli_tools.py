"""The `highwater` produce/consume commands as a user runs them: real processes against a real
3-broker cluster. Ctrl-C mid-stream, a wrong bootstrap, every offset form, headers,
tombstones, `topics create` with the brokers' defaults, every compression codec, the warning
while a partition has no leader, `perf consume`, and the Python clients' example script.

One cluster for the module; each test uses its own topics.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from client.metadata import ClusterMetadata
from protocol.compression import Compression
from protocol.messages.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.records import read_header
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    prepare_cluster,
    running_cluster,
    whole_cluster_around,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CLI = [sys.executable, "-m", "client.cli"]
DEADLINE_S = 60  # for conditions a test waits for (never a fixed sleep)
# Not Kafka's defaults (1 and 1), so that `topics create` can be seen to use them.
OVERRIDES = {**FAST_REPLICATION, "num.partitions": "2", "default.replication.factor": "2"}


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("cli-tools")
    with running_cluster(zookeeper.port, directory, OVERRIDES) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


def _env(cluster: Cluster) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    return {**env, "HIGHWATER_BOOTSTRAP": cluster.bootstrap, "PYTHONUNBUFFERED": "1"}


def cli(
    cluster: Cluster, *args: str, stdin: bytes = b"", timeout_s: float = DEADLINE_S
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, env=_env(cluster), timeout=timeout_s
    )


def start(cluster: Cluster, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CLI, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(cluster),
    )


class Lines:
    """The lines a process writes to stdout, collected by a thread as they come."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.lines: list[bytes] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while len(self.lines) < count:
            assert time.monotonic() < deadline, f"only {len(self.lines)} of {count} lines"
            time.sleep(0.01)

    def finish(self) -> list[bytes]:
        self._thread.join(DEADLINE_S)
        return self.lines


def create(cluster: Cluster, topic: str, partitions: int = 1, rf: int = 3) -> None:
    replicas = [[(p + i) % 3 + 1 for i in range(rf)] for p in range(partitions)]
    trio.run(create_topic, cluster, topic, replicas)


def no_traceback(stderr: bytes) -> None:
    assert b"Traceback" not in stderr and b"ExceptionGroup" not in stderr, stderr.decode()


def values(cluster: Cluster, topic: str, *args: str) -> list[str]:
    done = cli(cluster, "consume", topic, "-o", "beginning", "-e", *args)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().splitlines()


# -- Ctrl-C ----------------------------------------------------------------------------------


def test_ctrl_c_ends_consume_with_its_summary_and_exit_0(cluster: Cluster) -> None:
    create(cluster, "cli-sigint-consume", partitions=3)
    produced = cli(cluster, "produce", "cli-sigint-consume", stdin=b"".join(
        b"%d\n" % i for i in range(2000)))  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()
    proc = start(cluster, "consume", "cli-sigint-consume", "-o", "beginning")
    out = Lines(proc)
    out.wait_for(2000)  # everything read: it now waits for more, until Ctrl-C
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0
    no_traceback(stderr)
    assert stderr.decode().strip() == "Processed a total of 2000 messages"
    assert sorted(int(v) for v in out.finish()) == list(range(2000))


def test_ctrl_c_ends_produce_with_every_acknowledged_record_in_the_topic(
    cluster: Cluster,
) -> None:
    create(cluster, "cli-sigint-produce", partitions=2)
    proc = start(cluster, "produce", "cli-sigint-produce", "--print-offsets", "-K", ":")
    out = Lines(proc)
    assert proc.stdin is not None
    proc.stdin.write(b"".join(b"k%d:v%d\n" % (i % 7, i) for i in range(500)))
    proc.stdin.flush()
    out.wait_for(500)  # acknowledged; stdin stays open, as a terminal's would
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0
    no_traceback(stderr)
    assert stderr.decode().strip() == (
        "Processed a total of 500 records: 500 acknowledged, 0 failed, 0 unknown "
        "(no answer before the end)"
    )
    acknowledged = [json.loads(line) for line in out.finish()]
    assert all("offset" in a for a in acknowledged)
    stored = values(cluster, "cli-sigint-produce", "--format", "%p %o %s\n")
    assert len(stored) == 500
    positions = {(a["partition"], a["offset"]) for a in acknowledged}
    assert positions == {(int(p), int(o)) for p, o, _ in (s.split() for s in stored)}


def test_sigterm_ends_produce_like_ctrl_c(cluster: Cluster) -> None:
    create(cluster, "cli-sigterm")
    proc = start(cluster, "produce", "cli-sigterm", "--print-offsets")
    out = Lines(proc)
    assert proc.stdin is not None
    proc.stdin.write(b"a\nb\n")
    proc.stdin.flush()
    out.wait_for(2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0
    no_traceback(stderr)
    assert b"2 acknowledged, 0 failed, 0 unknown" in stderr


# -- failing fast ----------------------------------------------------------------------------


def test_a_wrong_bootstrap_fails_once_before_reading_1000_lines(cluster: Cluster) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    lines = b"".join(b"%d\n" % i for i in range(1000))
    # The deadline is max.block.ms (15 s): a command waiting per line would take hours.
    done = cli(cluster, "produce", "demo", "-b", nobody, stdin=lines, timeout_s=15)
    assert done.returncode == 1
    no_traceback(done.stderr)
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("Error: no broker answered a metadata request")
    assert line.endswith(f"(bootstrap {nobody})")


def test_an_unknown_topic_fails_once(cluster: Cluster) -> None:
    done = cli(cluster, "produce", "cli-never-created", stdin=b"x\n" * 1000, timeout_s=15)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "Error: UNKNOWN_TOPIC_OR_PARTITION: topic 'cli-never-created' does not exist "
        "(create it with `highwater topics create`)"
    ]
    done = cli(cluster, "consume", "cli-never-created", "-e", timeout_s=15)
    assert done.returncode == 1
    assert len(done.stderr.decode().splitlines()) == 1


def test_acls_on_a_cluster_without_an_authorizer_say_so(cluster: Cluster) -> None:
    """A plain cluster neither stores nor lists ACLs (Kafka's SECURITY_DISABLED); users'
    credentials may be set only by `super.users` (none here), or anyone could set anyone's
    password. Listing them needs nothing without an authorizer, as in Kafka."""
    for args in (
        ("acls", "list"),
        ("acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"),
        ("acls", "remove", "--topic", "t", "--force"),
    ):
        done = cli(cluster, *args)
        assert done.returncode == 1, done
        no_traceback(done.stderr)
        (line,) = done.stderr.decode().splitlines()
        assert line.startswith("Error: SECURITY_DISABLED"), line
    added = cli(cluster, "users", "add", "carol", "--password", "carol-secret")
    assert added.returncode == 1, added
    no_traceback(added.stderr)
    (line,) = added.stderr.decode().splitlines()
    assert line.startswith("Error: CLUSTER_AUTHORIZATION_FAILED"), line
    # No ACL would help here, so no `acls add` is suggested: the broker says what would.
    assert line.endswith(
        "(User:ANONYMOUS may not ALTER cluster kafka-cluster: without an authorizer, "
        "only super.users may change credentials)"
    ), line
    listed = cli(cluster, "users", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "carol" not in json.loads(listed.stdout)


def test_produce_warns_while_a_partition_has_no_leader(cluster: Cluster) -> None:
    create(cluster, "cli-leaderless", rf=1)  # partition 0 on broker 1 alone
    broker = cluster.brokers[1]
    broker.stop()
    try:
        done = cli(
            cluster,
            "produce",
            "cli-leaderless",
            "-b",
            f"{cluster.brokers[2].host}:{cluster.brokers[2].port}",
            "-X",
            "delivery.timeout.ms=12000",
            stdin=b"one\n",
        )
    finally:
        broker.start()
        prepare_cluster(cluster)
    assert done.returncode == 1
    no_traceback(done.stderr)
    stderr = done.stderr.decode()
    lines = stderr.strip().splitlines()
    warnings = [line for line in lines if line.startswith("WARN: ")]
    # The producer's on_retry hook: at once, then every 5 s until delivery.timeout.ms (12 s).
    assert len(warnings) >= 2, stderr
    assert all(w.startswith("WARN: cli-leaderless-0: ") for w in warnings), stderr
    assert all("retrying (1 record waiting, the oldest for " in w for w in warnings), stderr
    assert any(": LEADER_NOT_AVAILABLE, retrying" in w for w in warnings), stderr
    assert lines[-1].startswith("Error: 1 of 1 records failed"), stderr


# -- offsets ---------------------------------------------------------------------------------

# Offset i has timestamp BASE_MS + (i + 1) s: recent, or retention.ms (7 days) deletes it.
BASE_MS = (int(time.time()) - 3600) * 1000
STAMPS = [BASE_MS + 1_000 * (i + 1) for i in range(10)]


def at(seconds: float) -> str:
    """A time BASE_MS + seconds, in ms."""
    return str(BASE_MS + int(seconds * 1000))


def iso(seconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(BASE_MS / 1000 + seconds, datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def stamped(cluster: Cluster) -> str:
    topic = "cli-offsets"
    create(cluster, topic)
    lines = b"".join(
        json.dumps({"value": f"v{i}", "timestamp": ts}).encode() + b"\n"
        for i, ts in enumerate(STAMPS)
    )
    done = cli(cluster, "produce", topic, "--json", stdin=lines)
    assert done.returncode == 0, done.stderr.decode()
    return topic


@pytest.mark.parametrize(
    ("offsets", "expected"),
    [
        (["-o", "beginning"], range(10)),
        (["--from-beginning"], range(10)),
        (["-o", "end"], range(0)),
        (["-o", "3"], range(3, 10)),
        (["-o", "10"], range(0)),
        (["-o", "-2"], range(8, 10)),
        (["-o", "-20"], range(10)),
        (["-o", f"s@{at(5)}"], range(4, 10)),
        (["-o", f"s@{at(4.5)}"], range(4, 10)),
        (["--from-timestamp", iso(5)], range(4, 10)),
        (["-o", f"s@{at(5)}", "-o", f"e@{at(8)}"], range(4, 7)),
        (["-o", "beginning", "-o", f"e@{at(2)}"], range(1)),
        (["-o", f"s@{at(99)}"], range(0)),
        (["-o", "11", "-X", "auto.offset.reset=earliest"], range(10)),
    ],
)
def test_every_offset_form(
    cluster: Cluster, stamped: str, offsets: Sequence[str], expected: range
) -> None:
    done = cli(cluster, "consume", stamped, *offsets, "-e", "--format", "%o %T %s\n")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [f"{i} {STAMPS[i]} v{i}" for i in expected]
    assert done.stderr.decode().strip() == f"Processed a total of {len(expected)} messages"


@pytest.mark.parametrize(
    ("offsets", "status", "message"),
    [
        (["-o", "11"], 1, "offset 11 is not in cli-offsets-0: valid are 0 (the log start offset) "
         "to 10 (the high watermark)"),
        (["-o", "1900"], 1, "offset 1900 is not in cli-offsets-0"),
        (["-o", "stored"], 2, "-o stored (the group's committed offsets) needs --group GROUP"),
        (["-o", "later"], 2, "is not an offset"),
    ],
)  # fmt: skip
def test_offset_errors(
    cluster: Cluster, stamped: str, offsets: Sequence[str], status: int, message: str
) -> None:
    done = cli(cluster, "consume", stamped, *offsets, "-e")
    assert done.returncode == status
    assert message in done.stderr.decode()
    assert done.stdout == b""
    no_traceback(done.stderr)


# -- topics create -------------------------------------------------------------------------


def test_topics_create_without_counts_uses_the_brokers_defaults(cluster: Cluster) -> None:
    """As kafka-topics --create: num.partitions and default.replication.factor (KIP-464's -1)."""
    for topic, counts in (("cli-defaults", []), ("cli-three", ["--partitions", "3"])):
        done = cli(cluster, "topics", "create", topic, *counts)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == f"Created topic {topic}.\n"
    described = cli(cluster, "topics", "describe", "--json")
    assert described.returncode == 0, described.stderr.decode()
    shapes = {
        t["name"]: (len(t["partitions"]), {len(p["replicas"]) for p in t["partitions"]})
        for t in json.loads(described.stdout)
    }
    assert shapes["cli-defaults"] == (2, {2})
    assert shapes["cli-three"] == (3, {2})


# -- headers and codecs ------------------------------------------------------------------------


def test_headers_with_h(cluster: Cluster) -> None:
    create(cluster, "cli-headers")
    done = cli(cluster, "produce", "cli-headers", "-H", "trace=abc", "-H", "src=cli", stdin=b"v\n")
    assert done.returncode == 0, done.stderr.decode()
    assert values(cluster, "cli-headers", "--format", "%h|%s\n") == ["trace=abc,src=cli|v"]


def test_z_and_null_marker_produce_tombstones(cluster: Cluster) -> None:
    """A null value is stored, and read back as null (not as an empty value)."""
    create(cluster, "cli-tombstones")
    done = cli(cluster, "produce", "cli-tombstones", "-K", ":", "-Z", stdin=b"a:\nb:v\n")
    assert done.returncode == 0, done.stderr.decode()
    marked = cli(
        cluster, "produce", "-t", "cli-tombstones", "-K", ":", "--null-marker", "NULL",
        stdin=b"c:NULL\nd:\n",
    )  # fmt: skip
    assert marked.returncode == 0, marked.stderr.decode()
    records = [json.loads(line) for line in values(cluster, "cli-tombstones", "--json")]
    assert [(r["key"], r["value"]) for r in records] == [
        ("a", None),
        ("b", "v"),
        ("c", None),
        ("d", ""),
    ]


async def _stored_codecs(bootstrap: str, topic: str) -> set[int]:
    """The compression codec of each batch in partition 0, from a raw Fetch."""
    metadata = ClusterMetadata(bootstrap)
    try:
        await metadata.refresh([topic])
        leader = metadata.leader_for(topic, 0)
        assert leader is not None
        request = FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=(FetchTopic(topic, (FetchPartition(0, 0, 1 << 20),)),),
        )
        response: FetchResponse = await metadata.request(leader, request, timeout_ms=10_000)
    finally:
        await metadata.aclose()
    records = response.responses[0].partitions[0].records
    codecs, pos = set(), 0
    while pos < len(records):
        header = read_header(records, pos)
        codecs.add(header.compression)
        pos += header.size
    return codecs


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_round_trips_through_the_cluster(cluster: Cluster, codec: Compression) -> None:
    topic = f"cli-codec-{codec.name.lower()}"
    create(cluster, topic)
    lines = [f"record {i} " + "compressible " * (i % 5) for i in range(300)]
    done = cli(
        cluster,
        "produce",
        topic,
        "--compression",
        codec.name.lower(),
        stdin="\n".join(lines).encode(),
    )
    assert done.returncode == 0, done.stderr.decode()
    assert values(cluster, topic) == lines
    assert trio.run(_stored_codecs, cluster.bootstrap, topic) == {int(codec)}
    done = cli(cluster, "produce", topic, "-X", f"compression.type={codec.name}", stdin=b"x\n")
    assert done.returncode == 0, done.stderr.decode()


# -- perf consume ----------------------------------------------------------------------------


@pytest.mark.parametrize("messages", [300, 200])
def test_perf_consume_counts_and_its_yardstick_decodes_what_it_read(
    cluster: Cluster, messages: int
) -> None:
    topic = f"cli-perf-consume-{messages}"
    create(cluster, topic, partitions=3)
    lines = [f"record {i}" for i in range(300)]
    done = cli(cluster, "produce", topic, stdin="\n".join(lines).encode())
    assert done.returncode == 0, done.stderr.decode()
    done = cli(cluster, "perf", "consume", "--topic", topic, "--messages", str(messages))
    assert done.returncode == 0, done.stderr.decode()
    no_traceback(done.stderr)
    header, row, decode_only, ratio = done.stdout.decode().splitlines()[-4:]
    fields = dict(zip(header.split(", "), row.split(", "), strict=True))
    assert int(fields["data.consumed.in.nMsg"]) == messages
    assert float(fields["data.consumed.in.MB"]) > 0
    assert decode_only.startswith("decode only (same process, same batches): ")
    assert float(decode_only.split(": ")[1].split()[0]) > 0
    assert ratio.startswith("consumer / decode-only ratio: ")


# -- docs/examples/python_clients.py (docs/operations.md, "Python clients") --------------------

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "python_clients.py"


def _run_example(cluster: Cluster) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), cluster.bootstrap, "docs-orders"],
        env={**_env(cluster), "PYTHONPATH": str(ROOT)},  # the script's own dir is sys.path[0]
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    consumed = [line for line in lines if line.startswith("  ")]
    assert sorted(line.split()[-1] for line in consumed) == sorted(
        f"b'order-{i}'" for i in range(10)
    )
    assert lines[-2].startswith("blocking produce: partition ")
    assert lines[-1].startswith("blocking consume: ConsumerRecord(topic='docs-orders'")
    assert "value=b'from plain Python'" in lines[-1]
    return lines


def test_the_python_clients_example_runs_and_runs_again(cluster: Cluster) -> None:
    first = _run_example(cluster)
    assert first[0].startswith("produced 10; the last is partition ")
    again = _run_example(cluster)  # the group reads this run's records only
    assert again[0] == "docs-orders exists: the group goes on from its committed offsets"
    assert again[1].startswith("produced 10; the last is partition ")
