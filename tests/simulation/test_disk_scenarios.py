"""A full disk, scripted (KIP-112's offline log dirs): the broker stops appending there, gives
up its partitions, the controller elects other ISR members, nothing acknowledged is lost,
and after space is freed and the broker restarted it catches up. Every invariant is checked
after every step (invariants.py), and each story ends with the final convergence check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.simulation.cluster import SimCluster, quiet_logs
from tests.simulation.config import SimConfig
from tests.simulation.nemesis import free_disk
from tests.simulation.test_scenarios import TP, MakeCluster, leads, log_values, scripted, values


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    clusters: list[SimCluster] = []

    def make(config: SimConfig) -> SimCluster:
        clusters.append(SimCluster(0, tmp_path / f"cluster-{len(clusters)}", config))
        return clusters[-1]

    with quiet_logs():
        yield make
    for cluster in clusters:
        cluster.close()


def offline_everywhere(cluster: SimCluster, broker_id: int) -> bool:
    """The broker reported TP offline and the controller took it out of the ISR."""
    registration = cluster.world.zk.brokers.get(broker_id)
    return (
        registration is not None
        and TP in cluster.broker(broker_id).offline_since
        and broker_id not in cluster.zk_isr(TP)
    )


def test_a_leader_whose_disk_fills_hands_over_and_rejoins_after_a_restart(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(scripted())
    cluster.boot()
    leader = cluster.leader_of(TP)
    cluster.produce(TP, *values("a", "b"))
    cluster.wait_acked(TP, *values("a", "b"))

    cluster.broker(leader).fill_disk()
    cluster.produce(TP, b"refused")  # the write fails: KAFKA_STORAGE_ERROR, nothing appended
    cluster.run_until(lambda: offline_everywhere(cluster, leader), 5_000, "the leader offline")
    assert cluster.broker(leader).disk.failed_writes == 1
    assert cluster.producer.outcomes["KAFKA_STORAGE_ERROR"] == 1
    assert TP not in cluster.broker(leader).partitions  # it serves nothing of TP any more
    new_leader = cluster.leader_of(TP)
    assert new_leader not in (leader, -1)
    cluster.run_until(leads(cluster, new_leader), 5_000, "the new leader to take over")

    cluster.produce(TP, *values("c", "d"))  # the partition stays available
    cluster.wait_acked(TP, *values("c", "d"))
    assert leader not in cluster.zk_isr(TP)

    cluster.trace(f"SCRIPT: {free_disk(cluster.world, leader)}")
    assert not cluster.broker(leader).offline_since  # a restarted process
    cluster.wait_settled()
    cluster.check_final()
    for broker_id in (1, 2, 3):
        assert log_values(cluster, broker_id) == values("a", "b", "c", "d")


def test_a_follower_whose_disk_fills_leaves_the_isr_and_acks_go_on(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(scripted())
    cluster.boot()
    leader = cluster.leader_of(TP)
    follower = next(b for b in cluster.zk_isr(TP) if b != leader)
    cluster.broker(follower).fill_disk()
    cluster.produce(TP, *values("a", "b"))
    cluster.run_until(lambda: offline_everywhere(cluster, follower), 5_000, "the follower offline")
    cluster.wait_acked(TP, *values("a", "b"))  # min.insync.replicas 2: the two others
    assert cluster.leader_of(TP) == leader
    assert cluster.broker(follower).fetch_state(TP) is None  # it stopped fetching

    cluster.trace(f"SCRIPT: {free_disk(cluster.world, follower)}")
    cluster.wait_settled()
    cluster.check_final()
    assert log_values(cluster, follower) == values("a", "b")


def test_a_new_controller_keeps_offline_replicas_out(make_cluster: MakeCluster) -> None:
    """The offline partitions are in the broker's registration, so a controller elected later
    (loading everything) never makes the failed replica a leader."""
    cluster = make_cluster(scripted(brokers=3, min_insync_replicas=1))
    cluster.boot()
    leader = cluster.leader_of(TP)
    controller = cluster.controller_id()
    assert controller is not None
    failed = next(b for b in cluster.zk_isr(TP) if b not in (leader, controller))
    cluster.broker(failed).fill_disk()
    cluster.produce(TP, b"a")
    cluster.run_until(lambda: offline_everywhere(cluster, failed), 5_000, "its replica offline")
    cluster.wait_acked(TP, b"a")
    cluster.crash(controller)
    if controller == leader:
        cluster.run_until(lambda: cluster.leader_of(TP) not in (leader, -1), 5_000, "a leader")
    cluster.run_until(
        lambda: cluster.controller_id() not in (None, controller), 5_000, "a new controller"
    )
    cluster.run_for(2_000)  # the invariants run at every step: no offline leader anywhere
    assert cluster.leader_of(TP) != failed
    cluster.restart(controller)
    cluster.trace(f"SCRIPT: {free_disk(cluster.world, failed)}")
    cluster.wait_settled()
    cluster.check_final()
