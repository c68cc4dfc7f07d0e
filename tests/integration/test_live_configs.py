"""Config changes on a running 3-broker cluster (real processes, real ZooKeeper): every broker
applies them within seconds, to the logs it already has open.

The cluster runs with the settings a user has (the retention check every 5 minutes): a
lowered retention.ms must still delete old segments on every replica within seconds.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import trio

from client.admin import Admin, AlterConfigOp, ConfigResource, ConfigSource
from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError
from client.producer import Producer
from controller.core import PartitionState
from protocol.errors import ErrorCode
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata
from tests.integration.replication_checks import zk_view

pytestmark = pytest.mark.timeout(300)

SEGMENTS = {"segment.bytes": "1024"}  # many small segments within a few records


async def _wait_whole(cluster: Cluster, timeout_s: float = 60) -> None:
    async def whole() -> bool:
        for broker in cluster.brokers.values():
            meta = await fetch_metadata(broker.port)
            if meta is None or len(meta.brokers) != len(cluster.brokers) or meta.controller_id < 0:
                return False
        return True

    await eventually(whole, timeout_s, "all brokers registered with a controller")


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper.port, tmp_path_factory.mktemp("live-configs"), 3)
    cluster.start()
    try:
        trio.run(_wait_whole, cluster)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


@pytest.fixture
async def admin(cluster: Cluster) -> AsyncIterator[Admin]:
    await _wait_whole(cluster)
    async with Admin(cluster.bootstrap) as admin:
        yield admin


async def produce(cluster: Cluster, topic: str, count: int, size: int = 100) -> None:
    async with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(count):
            await (await producer.send(topic, b"x" * size + str(i).encode()))


async def refusal(cluster: Cluster, topic: str, size: int) -> HighwaterClientError | None:
    """Produce one record of `size` bytes: the error it met, or None once acknowledged."""
    async with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        try:
            await (await producer.send(topic, b"x" * size))
        except HighwaterClientError as exc:
            return exc
    return None


async def replicated(admin: Admin, topic: str, end: int) -> bool:
    """Every replica of partition 0 has `end` records."""
    (described,) = await admin.describe_topics([topic])
    leos = described.partitions[0].replica_log_end_offsets
    return len(leos) == 3 and all(leo == end for leo in leos.values())


def segment_bases(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    """Each broker's segment base offsets of partition 0."""
    return {
        b.broker_id: [int(p.stem) for p in b.segments(topic, 0)] for b in cluster.brokers.values()
    }


async def test_lowering_retention_ms_deletes_old_segments_on_every_replica(
    cluster: Cluster, admin: Admin
) -> None:
    topic = "retained"
    await admin.create_topic(topic, 1, 3, config=SEGMENTS)
    await produce(cluster, topic, 40)
    await eventually(lambda: replicated(admin, topic, 40), 30, "every replica has 40 records")
    before = segment_bases(cluster, topic)
    assert all(len(bases) > 3 for bases in before.values()), before
    await trio.sleep(1.5)  # every record is now older than the retention set next
    started = time.monotonic()
    await admin.alter_topic_configs(topic, {"retention.ms": "1000"})

    async def only_an_empty_segment_left() -> bool:
        return all(bases == [40] for bases in segment_bases(cluster, topic).values())

    await eventually(only_an_empty_segment_left, 15, "old segments deleted on every replica")
    assert time.monotonic() - started < 15  # not at the 5-minute retention check
    # Consumers see the new log start; the data is gone, the offsets are not reused.
    await produce(cluster, topic, 1)
    await eventually(lambda: replicated(admin, topic, 41), 30, "replicated after retention")


async def test_raising_max_message_bytes_lets_a_refused_batch_in(
    cluster: Cluster, admin: Admin
) -> None:
    topic = "large-records"
    await admin.create_topic(topic, 1, 3, config={"max.message.bytes": "1024"})
    refused = await refusal(cluster, topic, 4000)
    assert refused is not None and refused.code == ErrorCode.MESSAGE_TOO_LARGE
    await admin.alter_topic_configs(topic, {"max.message.bytes": "65536"})

    async def accepted() -> bool:
        error = await refusal(cluster, topic, 4000)
        assert error is None or error.code == ErrorCode.MESSAGE_TOO_LARGE, error
        return error is None

    await eventually(accepted, 15, "the leader to take the larger batch")
    await eventually(lambda: replicated(admin, topic, 1), 30, "every replica has the record")


async def test_describe_shows_each_value_with_its_source(cluster: Cluster, admin: Admin) -> None:
    topic = "described"
    await admin.create_topic(topic, 1, 3, config={"retention.ms": "86400000"})
    await admin.alter_topic_configs(topic, {"max.message.bytes": "2048"}, ["retention.ms"])
    await admin.alter_broker_defaults({"log.segment.bytes": "2097152"})
    try:
        found = await admin.describe_configs([ConfigResource.topic(topic)], include_synonyms=True)
        entries = {e.name: e for e in found[ConfigResource.topic(topic)]}
        assert (entries["max.message.bytes"].value, entries["max.message.bytes"].source) == (
            "2048",
            ConfigSource.DYNAMIC_TOPIC_CONFIG,
        )
        assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
            "2097152",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        )
        retention = entries["retention.ms"]  # the override was deleted
        assert (retention.value, retention.source) == ("604800000", ConfigSource.DEFAULT_CONFIG)
        assert [s.name for s in retention.synonyms] == ["log.retention.hours"]
        # A broker's settings come from that broker; the dynamic ones are not read-only.
        broker = (await admin.describe_configs([ConfigResource.broker(2)]))[
            ConfigResource.broker(2)
        ]
        by_name = {e.name: e for e in broker}
        assert by_name["broker.id"].value == "2" and by_name["broker.id"].read_only
        assert by_name["log.segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        assert not by_name["log.segment.bytes"].read_only
        defaults = (await admin.describe_configs([ConfigResource.broker()]))[
            ConfigResource.broker()
        ]
        assert [(e.name, e.value) for e in defaults] == [("log.segment.bytes", "2097152")]
    finally:
        await admin.alter_broker_defaults(delete_configs=["log.segment.bytes"])


REFUSED = ConfigResource.topic("refused")
MISSING = ConfigResource.topic("no-such")
DEFAULTS = ConfigResource.broker()
BROKER_1 = ConfigResource.broker(1)
INVALID_CONFIG, INVALID_REQUEST = ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("resource", "key", "value", "code", "named"),
    [
        (REFUSED, "retention.mss", "1", INVALID_CONFIG, "retention.mss"),
        (REFUSED, "retention.ms", "soon", INVALID_CONFIG, "retention.ms"),
        (REFUSED, "cleanup.policy", "compaction", INVALID_CONFIG, "cleanup.policy"),
        (MISSING, "retention.ms", "1", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no-such"),
        (DEFAULTS, "log.dirs", "/x", INVALID_REQUEST, "log.dirs"),
        (DEFAULTS, "log.retention.ms", "-5", INVALID_CONFIG, "log.retention.ms"),
        (BROKER_1, "log.retention.ms", "5", INVALID_REQUEST, "per-broker"),
    ],
)
async def test_a_refused_change_names_the_key_and_changes_nothing(
    cluster: Cluster,
    admin: Admin,
    resource: ConfigResource,
    key: str,
    value: str,
    code: ErrorCode,
    named: str,
) -> None:
    await _ensure_refused_topic(cluster, admin)
    with pytest.raises(HighwaterClientError) as refused:
        await admin.incremental_alter_configs({resource: [AlterConfigOp(key, value=value)]})
    assert refused.value.code == code
    assert named in str(refused.value)
    found = await admin.describe_configs([DEFAULTS, REFUSED])
    assert found[DEFAULTS] == []
    overrides = {e.name: e.value for e in found[REFUSED] if e.source.name == "DYNAMIC_TOPIC_CONFIG"}
    assert overrides == {"retention.ms": "5000"}


async def _ensure_refused_topic(cluster: Cluster, admin: Admin) -> None:
    """Create REFUSED once for all the cases, and wait until every broker's metadata has it:
    the admin may ask a broker that has not heard of it yet (TOPIC_ALREADY_EXISTS then)."""
    try:
        await admin.create_topic(REFUSED.name, 1, 3, config={"retention.ms": "5000"})
    except HighwaterClientError as error:
        if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise

    async def known_everywhere() -> bool:
        for broker in cluster.brokers.values():
            meta = await fetch_metadata(broker.port)
            if meta is None or REFUSED.name not in {t.name for t in meta.topics}:
                return False
        return True

    await eventually(known_everywhere, 30, f"every broker to know topic {REFUSED.name!r}")


async def test_dynamic_defaults_reach_logs_already_open(cluster: Cluster, admin: Admin) -> None:
    """A cluster-wide log.retention.ms applies to every topic without an override of it."""
    await admin.create_topic("by-default", 1, 3, config=SEGMENTS)
    await admin.create_topic("overridden", 1, 3, config={**SEGMENTS, "retention.ms": "-1"})
    for topic in ("by-default", "overridden"):
        await produce(cluster, topic, 20)
    await eventually(lambda: replicated(admin, "by-default", 20), 30, "replicated")
    await eventually(lambda: replicated(admin, "overridden", 20), 30, "replicated")
    await trio.sleep(1.5)
    await admin.alter_broker_defaults({"log.retention.ms": "1000"})
    try:

        async def deleted() -> bool:
            return all(bases == [20] for bases in segment_bases(cluster, "by-default").values())

        await eventually(deleted, 15, "the default's retention on every replica")
        kept = segment_bases(cluster, "overridden")
        assert all(bases[0] == 0 and len(bases) > 3 for bases in kept.values()), kept
    finally:
        await admin.alter_broker_defaults(delete_configs=["log.retention.ms"])


def test_the_cli_alters_and_describes(cluster: Cluster) -> None:
    trio.run(_create, cluster, "cli-configs")
    bootstrap = ["-b", cluster.bootstrap]
    altered = _cli("topics", "alter", "cli-configs", "--config", "retention.ms=60000", *bootstrap)
    assert altered == "Updated configs of topic 'cli-configs': set retention.ms=60000.\n"
    described = _cli("configs", "describe", "--topic", "cli-configs", *bootstrap).splitlines()
    assert described[0] == "Configs of topic 'cli-configs':"
    assert described[1].split() == ["Config", "Value", "Source"]
    rows = {line.split()[0]: line.split()[1:] for line in described[2:]}
    assert rows["retention.ms"] == ["60000", "DYNAMIC_TOPIC_CONFIG"]
    assert rows["segment.bytes"] == ["1073741824", "DEFAULT_CONFIG"]
    topic_line = _cli("topics", "describe", "cli-configs", *bootstrap).splitlines()[0]
    assert topic_line.endswith("\tConfigs: retention.ms=60000")


async def _create(cluster: Cluster, topic: str) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 3)


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", *args], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def test_allowing_unclean_election_elects_a_leaderless_partition(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Kafka's TopicUncleanLeaderElectionEnable: the controller watches /config/changes, and a
    topic that now allows unclean election elects its partitions without a live ISR member."""
    overrides = {
        "replica.lag.time.max.ms": "2000",  # the paused follower leaves the ISR quickly
        "replica.fetch.wait.max.ms": "200",
        "isr.change.propagation.blackout.ms": "300",  # ...and the metadata shows it soon
        "zookeeper.session.timeout.ms": "10000",  # it keeps its session while paused
    }
    cluster = Cluster(zookeeper.port, tmp_path_factory.mktemp("unclean"), 3, overrides)
    cluster.start()
    try:
        await _wait_whole(cluster)
        await _leaderless_until_unclean_allowed(cluster)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


async def _leaderless_until_unclean_allowed(cluster: Cluster) -> None:
    """The partition's state as ZooKeeper holds it (the controller's decisions), not the
    brokers' metadata (which a paused controller would hold back)."""
    topic = "unclean"
    async with Admin(cluster.bootstrap) as admin, zk_view(cluster) as zk:
        await admin.create_topic(topic, 1, 2)
        await produce(cluster, topic, 5)

        async def state() -> PartitionState:
            found = await zk.partition_state(topic, 0)
            assert found is not None
            return found

        async def in_sync() -> PartitionState | None:
            found = await state()
            return found if len(found.isr) == 2 else None

        in_sync_state = await eventually(in_sync, 30, "both replicas in the ISR")
        leader = in_sync_state.leader
        (follower,) = (r for r in in_sync_state.isr if r != leader)
        cluster.brokers[follower].pause()
        await eventually(
            lambda: _holds(state(), lambda s: s.isr == (leader,)), 20, "the follower out of the ISR"
        )
        cluster.brokers[leader].kill()
        cluster.brokers[follower].resume()
        await eventually(
            lambda: _holds(state(), lambda s: s.leader == -1), 30, "no leader: the ISR is gone"
        )
        await trio.sleep(2)
        assert (await state()).leader == -1  # unclean election is off
        await admin.alter_topic_configs(topic, {"unclean.leader.election.enable": "true"})
        elected = await eventually(
            lambda: _holds(state(), lambda s: s.leader == follower), 15, "the follower elected"
        )
        assert elected.isr == (follower,)


async def _holds(
    found: Awaitable[PartitionState], condition: Callable[[PartitionState], bool]
) -> PartitionState | None:
    value = await found
    return value if condition(value) else None
