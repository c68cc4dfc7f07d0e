"""An operator's stories, scripted step by step in the simulation: partition reassignment,
topic deletion, controlled shutdown and preferred/unclean leader elections, each through the
same controller and broker code as a real cluster, with every invariant checked after every
step (invariants.py, operator_invariants.py) and the final convergence check.

The first test is a bug this simulation found: a controller that completed a reassignment
and failed before its StopReplica reached the removed replica left that replica's log there
for good. It failed before the fix (broker.core.replica_manager.delete_stray_logs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller import zk_data
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition
from tests.simulation.cluster import SimCluster, quiet_logs
from tests.simulation.test_scenarios import MakeCluster, leads, scripted, values

TP = TopicPartition("t", 0)


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    clusters: list[SimCluster] = []

    def make(config: object) -> SimCluster:
        cluster = SimCluster(0, tmp_path / f"cluster-{len(clusters)}", config)  # type: ignore[arg-type]
        clusters.append(cluster)
        return cluster

    with quiet_logs():
        yield make
    for cluster in clusters:
        cluster.close()


def plan_is_empty(cluster: SimCluster) -> bool:
    return cluster.world.zk.data(zk_data.REASSIGN_PARTITIONS_PATH) is None


def answered(cluster: SimCluster, count: int) -> Callable[[], bool]:
    return lambda: len(cluster.operator.replies) >= count


def test_removed_replica_drops_its_log_when_the_controller_died_before_telling_it(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(scripted(brokers=4))
    cluster.boot()
    controller = cluster.controller_id()
    assert controller is not None
    replicas = cluster.world.zk.assignments["t"][0]
    removed = next(b for b in replicas if b != controller)
    target = tuple(b for b in (*replicas, 4) if b != removed)
    cluster.produce(TP, *values("a", "b"))
    cluster.wait_acked(TP, *values("a", "b"))

    cluster.isolate(removed)  # its StopReplica (delete) will not get through
    assert cluster.operator.reassign(TP, target)
    cluster.run_until(answered(cluster, 1), 5_000, "the controller's answer")
    cluster.run_until(lambda: plan_is_empty(cluster), 10_000, "the reassignment to complete")
    assert cluster.world.zk.assignments["t"][0] == target
    assert TP in cluster.broker(removed).logs
    cluster.crash(controller)  # before it could ever tell the removed replica
    cluster.heal()
    cluster.run_until(
        lambda: cluster.controller_id() not in (None, controller), 5_000, "a new controller"
    )
    cluster.run_until(
        lambda: TP not in cluster.broker(removed).logs, 5_000, "the removed replica's log to go"
    )
    cluster.restart(controller)
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []


def test_reassignment_under_load_keeps_every_ack(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(scripted(brokers=4, enable_producer=True))
    cluster.boot()
    replicas = cluster.world.zk.assignments["t"][0]
    target = (4, *replicas[1:])
    assert cluster.operator.reassign(TP, target)
    cluster.run_until(answered(cluster, 1), 5_000, "the controller's answer")
    cluster.run_until(lambda: plan_is_empty(cluster), 10_000, "the reassignment to complete")
    assert cluster.operator_invariants.completed_reassignments == 1
    cluster.producer.running = False
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []
    assert TP not in cluster.broker(replicas[0]).logs  # moved away: deleted


def test_topic_deleted_while_a_replica_is_down_is_gone_everywhere(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(scripted())
    cluster.boot()
    doomed = TopicPartition("doomed", 0)
    assert cluster.operator.create_topic("doomed", {0: (1, 2, 3)})
    cluster.run_until(lambda: cluster.leader_of(doomed) > 0, 5_000, "the new topic's leader")
    cluster.produce(doomed, *values("x", "y"))
    cluster.wait_acked(doomed, *values("x", "y"))
    down = next(b for b in (1, 2, 3) if b != cluster.controller_id())
    cluster.crash(down, keep="all")
    assert cluster.operator.delete_topic("doomed")
    cluster.run_until(lambda: "doomed" not in cluster.world.zk.assignments, 5_000, "deletion")
    assert doomed in cluster.broker(down).logs or not cluster.broker(down).alive
    cluster.restart(down)
    cluster.wait_settled()  # includes: no broker keeps a log the assignments do not give it
    cluster.check_final()
    for broker in (1, 2, 3):
        assert not any(tp.topic == "doomed" for tp in cluster.broker(broker).logs)


def test_controlled_shutdown_without_a_controller_stops_within_its_timeout(
    make_cluster: MakeCluster,
) -> None:
    """Cut off from the controller, a stopping broker makes its attempts within
    controlled.shutdown.timeout.ms (broker/core/controlled_shutdown.py's shares), then stops
    anyway; the simulator's own loop took 3 x (request.timeout.ms + back-off) = 3.6 s."""
    cluster = make_cluster(scripted(controlled_shutdown_timeout_ms=1_500))
    cluster.boot()
    controller = cluster.controller_id()
    stopping = next(b for b in (1, 2, 3) if b != controller)
    cluster.isolate(stopping)
    asked_ms = cluster.world.now_ms
    cluster.broker(stopping).shut_down()
    cluster.run_until(lambda: not cluster.broker(stopping).alive, 5_000, "the broker to stop")
    assert cluster.world.now_ms - asked_ms <= 1_500
    attempts = cluster.broker(stopping).shutdown_attempts
    assert attempts is not None
    assert (attempts.attempts, attempts.accepted) == (3, False)
    cluster.heal()
    cluster.restart(stopping)
    cluster.wait_settled()
    cluster.check_final()


def test_controlled_shutdown_moves_leadership_before_the_leader_stops(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(scripted())
    cluster.boot()
    leader = cluster.leader_of(TP)
    cluster.produce(TP, *values("a", "b", "c"))
    cluster.wait_acked(TP, *values("a", "b", "c"))
    cluster.broker(leader).shut_down()
    cluster.run_until(lambda: not cluster.broker(leader).alive, 5_000, "the leader to stop")
    moved_to = cluster.leader_of(TP)
    assert moved_to not in (-1, leader), "leadership moved before it stopped"
    assert cluster.operator_invariants.answered["controlled shutdowns"] == 1
    cluster.run_until(leads(cluster, moved_to), 5_000, "the new leader to take over")
    cluster.produce(TP, b"d")
    cluster.wait_acked(TP, b"d")
    cluster.restart(leader)
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []


def test_preferred_election_brings_leadership_home(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(scripted())
    cluster.boot()
    preferred = cluster.world.zk.assignments["t"][0][0]
    assert cluster.leader_of(TP) == preferred
    cluster.crash(preferred, keep="all")
    cluster.run_until(lambda: cluster.leader_of(TP) not in (-1, preferred), 5_000, "failover")
    cluster.restart(preferred)
    cluster.wait_settled()
    assert cluster.leader_of(TP) != preferred

    def controller_sees_it_in_sync() -> bool:  # the leader's ISR change, propagated (damped)
        controller = cluster.broker(cluster.controller_id() or 0).controller
        state = controller.context.partition_states.get(TP) if controller else None
        return state is not None and preferred in state.isr

    cluster.run_until(controller_sees_it_in_sync, 10_000, "the controller to see it in sync")
    assert cluster.operator.elect(ElectionType.PREFERRED, (TP,))
    cluster.run_until(answered(cluster, 1), 5_000, "the controller's answer")
    cluster.run_until(leads(cluster, preferred), 5_000, "the preferred replica to lead")
    assert cluster.operator_invariants.answered["preferred elections"] == 1
    cluster.wait_settled()
    cluster.check_final()


def test_unclean_election_on_request_brings_a_leaderless_partition_back(
    make_cluster: MakeCluster,
) -> None:
    """min.insync.replicas 1: the last ISR member takes acks alone, then fails; an unclean
    election on request lets the other replica lead, losing those acks (as Kafka warns)."""
    cluster = make_cluster(scripted(brokers=2, replication_factor=2, min_insync_replicas=1))
    cluster.boot()
    leader = cluster.leader_of(TP)
    other = next(b for b in (1, 2) if b != leader)
    cluster.produce(TP, b"both")
    cluster.wait_acked(TP, b"both")
    cluster.crash(other, keep="all")
    cluster.run_until(lambda: cluster.zk_isr(TP) == (leader,), 5_000, "the ISR to shrink")
    cluster.produce(TP, b"alone")
    cluster.wait_acked(TP, b"alone")
    cluster.crash(leader, keep="all")
    cluster.restart(other)
    cluster.run_until(lambda: cluster.leader_of(TP) == -1, 5_000, "the partition to go offline")
    assert cluster.operator.elect(ElectionType.UNCLEAN, (TP,))
    cluster.run_until(answered(cluster, 1), 5_000, "the controller's answer")
    cluster.run_until(leads(cluster, other), 5_000, "the out-of-sync replica to lead")
    assert cluster.operator_invariants.answered["unclean elections"] == 1
    cluster.restart(leader)
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == [(b"alone",)]
