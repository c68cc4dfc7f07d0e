"""A regex subscription (ConsumerGroupHeartbeat's `subscribed_topic_regex`) cannot stall the
coordinator: the broker matches it against every topic name on its one thread. With Python's
backtracking `re`, (a|a)+, ((a+))+ (which passed the nested-quantifier check of then) and
.*.*.*.*.*.*.*.*@ took from minutes to ages on a 62-character name, so the broker answered
nobody and its ZooKeeper session expired; RE2 (as Kafka's RE2J) matches in linear time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.network import connect
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from tests.integration.cluster_harness import BrokerProcess, Cluster
from tests.integration.replication_checks import FAST_REPLICATION, create_topic, prepare_cluster

pytestmark = [pytest.mark.integration]

E = ErrorCode
STALL_S: Final = 15.0  # far beyond an answer's time; the stall below lasts for ages
LONG_TOPIC: Final = "a" * 60 + "-x"  # a name such regexes backtrack over exponentially


@pytest.fixture
def lone_broker(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A 1-broker cluster of its own: the input may leave it stuck, so it is killed after."""
    overrides = {
        **FAST_REPLICATION,
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",  # one broker: the topic needs only one
    }
    cluster = Cluster(zookeeper.port, tmp_path, 1, overrides)
    cluster.start()
    try:
        prepare_cluster(cluster)
        trio.run(create_topic, cluster, LONG_TOPIC, [[1]])
        yield cluster.brokers[1]
    finally:
        cluster.brokers[1].kill()
        cluster.stop()


@pytest.mark.parametrize(
    "regex",
    ["(a|a)+", "((a+))+", ".*.*.*.*.*.*.*.*@"],
    ids=["alternation", "nested-groups", "sequential-stars"],
)
def test_a_regex_subscription_does_not_stall_the_coordinator(
    lone_broker: BrokerProcess, regex: str
) -> None:
    """Refused (INVALID_REQUEST) or matched in reasonable time: either way answered, and the
    broker goes on answering other clients."""

    async def run() -> None:
        port = lone_broker.port
        group = "regex-stall"
        conn = await connect(lone_broker.host, port)
        other = await connect(lone_broker.host, port, client_id="other")
        try:
            with trio.fail_after(60):
                while True:
                    found = await conn.request(FindCoordinatorRequest((group,)))
                    if found.coordinators[0].error_code == E.NONE:
                        break
                    await trio.sleep(0.2)
            join = ConsumerGroupHeartbeatRequest(
                group,
                "",
                0,
                rebalance_timeout_ms=60_000,
                subscribed_topic_regex=regex,
                topic_partitions=(),
            )
            with trio.fail_after(STALL_S):
                while True:
                    answer = await conn.request(join)
                    if answer.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                        break
                    await trio.sleep(0.2)
            assert answer.error_code in (E.NONE, E.INVALID_REQUEST), answer
            with trio.fail_after(STALL_S):
                await other.request(MetadataRequest(()))
        finally:
            with trio.move_on_after(1):
                await conn.aclose()
                await other.aclose()

    trio.run(run)
