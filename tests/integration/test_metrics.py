"""Metric values follow the cluster: real broker processes, a real ZooKeeper, /metrics scraped
over HTTP and parsed with prometheus-client's parser.

A follower killed: UnderReplicatedPartitions goes from 0 to the count it follows within the
lag time, back to 0 after it returns (ISR shrinks and expands counted). The controller killed:
exactly one broker reports ActiveControllerCount 1 afterwards, with a higher epoch. An unclean
election increments its counter. Per-API request and error counters match what the test sent.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.network import connect
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.metrics_checks import (
    Scrape,
    ascrape,
    commit_offsets,
    metrics_cluster,
    metrics_port,
    value,
)
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    produce,
    wait_isr,
    wait_whole,
    whole_cluster_around,
    zk_view,
)

pytestmark = [pytest.mark.integration]

LAG_TIME_MAX_MS = 2000
OVERRIDES = {
    **FAST_REPLICATION,
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
}
URP = "highwater_replica_manager_under_replicated_partitions"
ACTIVE = "highwater_controller_active_controller_count"
EPOCH = "highwater_controller_epoch"
GROUP_LAG = "highwater_consumer_group_lag"
TOTAL_TIME_COUNT = "highwater_network_request_total_time_seconds_count"


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with metrics_cluster(zookeeper.port, tmp_path_factory.mktemp("metrics"), OVERRIDES) as c:
        yield c


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


async def scrapes(cluster: Cluster) -> dict[int, Scrape]:
    """Every running broker's /metrics (a broker that does not answer is left out)."""
    out: dict[int, Scrape] = {}
    for broker in cluster.running_brokers():
        found = await ascrape(broker)
        if found is not None:
            out[broker.broker_id] = found
    return out


async def total(cluster: Cluster, name: str, **labels: str) -> float:
    return sum(value(s, name, **labels) for s in (await scrapes(cluster)).values())


async def active_controller(cluster: Cluster) -> tuple[int, float] | None:
    """(broker id, epoch) when exactly one running broker reports itself active controller."""
    found = await scrapes(cluster)
    if len(found) != len(cluster.running_brokers()):
        return None
    active = [(b, s) for b, s in found.items() if value(s, ACTIVE) == 1]
    if len(active) != 1:
        return None
    broker_id, figures = active[0]
    others = [s for b, s in found.items() if b != broker_id]
    assert all(value(s, EPOCH) == 0 for s in others), "only the active controller reports"
    return broker_id, value(figures, EPOCH)


async def test_every_broker_exposes_its_process_figures(cluster: Cluster) -> None:
    """prometheus-client's process_* and python_* families, per broker process."""
    found = await scrapes(cluster)
    assert len(found) == 3
    for figures in found.values():
        assert value(figures, "process_resident_memory_bytes") > 1 << 20
        assert value(figures, "process_open_fds") > 0
        names = {name for name, _ in figures}
        assert {"python_gc_collections_total", "python_info"} <= names


async def test_under_replicated_partitions_follow_a_killed_follower(cluster: Cluster) -> None:
    controller, _ = await eventually(lambda: active_controller(cluster), 30, "one controller")
    victim = next(b for b in sorted(cluster.brokers) if b != controller)
    others = [b for b in sorted(cluster.brokers) if b != victim]
    # The victim follows all three partitions and leads none.
    assignments = [[others[0], others[1], victim], [others[1], others[0], victim]] * 2
    await create_topic(cluster, "urp", assignments[:3])
    await produce(cluster, "urp", 0, [b"a", b"b"])
    await eventually(
        lambda: _urp_is(cluster, 0), 20, "no under-replicated partitions before the kill"
    )
    shrinks_before = await total(cluster, "highwater_replica_manager_isr_shrinks_total")
    killed_at = time.monotonic()
    cluster.brokers[victim].kill()
    await eventually(lambda: _urp_is(cluster, 3), 20, "3 under-replicated partitions")
    print(f"3 under-replicated partitions {time.monotonic() - killed_at:.1f} s after the kill")
    # Within the lag time, shown by how, not by a clock: the leaders shrank the ISRs
    # themselves (ISR expiry drops a follower silent for replica.lag.time.max.ms, 1 to 1.5
    # lag times after its last fetch). The other way out, the controller's after the victim's
    # ZooKeeper session expires (6 s here), counts no shrink (Kafka's IsrShrinksPerSec is the
    # leader's), so it would fail this.
    shrinks = await total(cluster, "highwater_replica_manager_isr_shrinks_total")
    assert shrinks - shrinks_before == 3
    assert await total(cluster, "highwater_replica_manager_at_min_isr_partitions") == 0
    expands_before = await total(cluster, "highwater_replica_manager_isr_expands_total")
    cluster.brokers[victim].start()
    await wait_whole(cluster)
    await eventually(lambda: _urp_is(cluster, 0), 30, "under-replicated partitions back to 0")
    expands = await total(cluster, "highwater_replica_manager_isr_expands_total")
    assert expands - expands_before == 3


async def _urp_is(cluster: Cluster, count: int) -> bool:
    found = await scrapes(cluster)
    return len(found) == len(cluster.running_brokers()) and (
        sum(value(s, URP) for s in found.values()) == count
    )


async def test_one_active_controller_after_failover_with_a_higher_epoch(cluster: Cluster) -> None:
    controller, epoch = await eventually(lambda: active_controller(cluster), 30, "a controller")
    assert epoch > 0
    cluster.brokers[controller].kill()

    async def new_controller() -> tuple[int, float] | None:
        found = await active_controller(cluster)
        return found if found is not None and found[0] != controller else None

    successor, new_epoch = await eventually(new_controller, 30, "a new active controller")
    assert new_epoch > epoch
    figures = await scrapes(cluster)
    assert value(figures[successor], "highwater_controller_global_topic_count") >= 0
    cluster.brokers[controller].start()
    await wait_whole(cluster)
    again = await eventually(lambda: active_controller(cluster), 30, "one active controller")
    assert again == (successor, new_epoch)  # the restarted broker did not take over


async def test_an_unclean_election_is_counted(cluster: Cluster) -> None:
    controller, _ = await eventually(lambda: active_controller(cluster), 30, "a controller")
    leader, follower = (b for b in sorted(cluster.brokers) if b != controller)
    await create_topic(
        cluster, "unclean", [[leader, follower]], {"unclean.leader.election.enable": "true"}
    )
    await produce(cluster, "unclean", 0, [b"x"])
    before = await total(cluster, "highwater_controller_unclean_leader_elections_total")
    async with zk_view(cluster) as zk:
        cluster.brokers[follower].kill()
        await wait_isr(cluster, zk, "unclean", 0, [leader])
        cluster.brokers[leader].kill()  # offline: its only ISR member is gone
        cluster.brokers[follower].start()  # out of sync, elected only uncleanly
        await wait_isr(cluster, zk, "unclean", 0, [follower], leader=follower, timeout_s=60)

    async def counted() -> bool:
        found = await total(cluster, "highwater_controller_unclean_leader_elections_total")
        return found == before + 1

    await eventually(counted, 10, "the unclean election counted")


async def test_request_counters_match_the_requests_sent(cluster: Cluster) -> None:
    broker: BrokerProcess = cluster.running_brokers()[0]
    before = await ascrape(broker)
    assert before is not None
    conn = await connect(broker.host, broker.port)
    try:
        for _ in range(7):
            await conn.request(MetadataRequest(()))
        unknown = ListOffsetsTopic("no-such-topic", (ListOffsetsPartition(0, LATEST_TIMESTAMP),))
        for _ in range(5):
            await conn.request(ListOffsetsRequest(-1, (unknown,)))
    finally:
        await conn.aclose()

    async def recorded() -> Scrape | None:
        # A request's figures are recorded once its response is written, so the last one may
        # land just after its answer reached us: scrape until the last API's count is in.
        found = await ascrape(broker)
        if found is None:
            return None
        done = value(found, TOTAL_TIME_COUNT, request="ListOffsets")
        return found if done - value(before, TOTAL_TIME_COUNT, request="ListOffsets") >= 5 else None

    after = await eventually(recorded, 10, "the requests' figures on /metrics")

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("highwater_network_requests_total", request="Metadata") == 7
    assert delta("highwater_network_requests_total", request="ListOffsets") == 5
    assert (
        delta(
            "highwater_network_errors_total",
            request="ListOffsets",
            error="UNKNOWN_TOPIC_OR_PARTITION",
        )
        == 5
    )
    assert delta("highwater_network_request_total_time_seconds_count", request="Metadata") == 7
    assert delta("highwater_network_request_bytes_total", request="Metadata") > 0
    assert delta("highwater_socket_server_connections_accepted_total") >= 1


async def test_consumer_group_lag_is_the_high_watermark_minus_the_committed_offset(
    cluster: Cluster,
) -> None:
    await create_topic(cluster, "lagged", [[1, 2, 3], [2, 3, 1]])
    await produce(cluster, "lagged", 0, [b"%d" % i for i in range(10)])
    await produce(cluster, "lagged", 1, [b"%d" % i for i in range(4)])
    node = await commit_offsets(cluster, "lag-group", "lagged", {0: 3, 1: 4})
    target = cluster.brokers[node]

    async def lag_reported() -> Scrape | None:
        found = await ascrape(target)
        if (
            found is None
            or value(found, GROUP_LAG, group="lag-group", topic="lagged", partition="0") != 7
        ):
            return None
        return found

    found = await eventually(lag_reported, 20, "the group's lag on its coordinator")
    assert value(found, GROUP_LAG, group="lag-group", topic="lagged", partition="1") == 0
    # The status page's JSON, from a broker that is not the coordinator, sees it too.
    other = next(b for b in cluster.running_brokers() if b.broker_id != node)
    page = await trio.to_thread.run_sync(
        _get_json, f"http://127.0.0.1:{metrics_port(other)}/api/cluster"
    )
    (group,) = [g for g in page["groups"] if g["name"] == "lag-group"]
    assert group["lag"] == 7
    assert {(p["partition"], p["committed"], p["lag"]) for p in group["partitions"]} == {
        (0, 3, 7),
        (1, 4, 0),
    }


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())
