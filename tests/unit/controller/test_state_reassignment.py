"""Partition reassignment (KIP-455 semantics): the controller's pure core."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core import (
    AlterReassignmentsReply,
    ControllerContext,
    Elected,
    IsrChanged,
    PartitionState,
    Reassignment,
    ReassignmentsRequested,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    TopicsChanged,
    WritePartitionStates,
    WriteReassignmentPlan,
    WriteTopicAssignment,
    handle,
)
from controller.zk_data import PartitionStateZnode, ReassignmentPlan, ZkDataError
from protocol.errors import ErrorCode
from tests.unit.controller.test_state import (
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    EPOCH_ZK_VERSION,
    elect,
    live,
    of_type,
    state,
)

T = "t"
TP = (T, 0)


def reply(effects: list[Any]) -> dict[tuple[str, int], ErrorCode]:
    found = of_type(effects, AlterReassignmentsReply)
    assert len(found) == 1 and effects[-1] is found[0]  # the answer comes last
    return dict(found[0].results)


def started() -> tuple[ControllerContext, list[Any]]:
    """t-0 on {1,2} led by 1, asked to move to {2,3}."""
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2)}}, {TP: state(1, 7, [1, 2])})
    return handle(ctx, ReassignmentsRequested({TP: (2, 3)}), 0)


def lai_items(effects: list[Any]) -> dict[int, Any]:
    out = {}
    for e in of_type(effects, SendLeaderAndIsr):
        (item,) = e.request.partition_states
        out[e.broker_id] = item
    return out


def test_start_adds_target_replicas_and_bumps_the_leader_epoch() -> None:
    ctx, effects = started()
    assert reply(effects) == {TP: ErrorCode.NONE}
    assert ctx.assignments[T][0] == (2, 3, 1)  # RS = TRS + ORS (Kafka's order)
    assert ctx.reassignments == {TP: Reassignment((2, 3), (1, 2))}
    # ZooKeeper first: the plan, the partition state (CAS), the topic znode.
    kinds = [type(e) for e in effects if not type(e).__name__.startswith(("Log", "Send"))]
    assert kinds[:3] == [WriteReassignmentPlan, WritePartitionStates, WriteTopicAssignment]
    (plan,) = of_type(effects, WriteReassignmentPlan)
    assert plan.reassignments == {TP: Reassignment((2, 3), (1, 2))}
    (write,) = of_type(effects, WritePartitionStates)
    assert write.updates == {TP: (PartitionStateZnode(1, 8, (1, 2), CONTROLLER_EPOCH), 4)}
    (topic,) = of_type(effects, WriteTopicAssignment)
    assert (topic.expected, topic.assignment) == ({0: (1, 2)}, {0: (2, 3, 1)})
    items = lai_items(effects)
    assert set(items) == {1, 2, 3}  # the adding replica learns it is a follower
    assert items[3].replicas == (2, 3, 1) and items[3].leader == 1
    assert (items[3].adding_replicas, items[3].removing_replicas) == ((3,), (1,))
    assert not of_type(effects, SendStopReplica)
    assert len(of_type(effects, SendUpdateMetadata)) == 1


def test_completes_when_the_target_is_in_the_isr() -> None:
    ctx, _ = started()
    # Not yet: 3 is not in the ISR.
    same, effects = handle(ctx, IsrChanged({TP: state(1, 8, [1, 2], version=5)}), 0)
    assert same.reassignments and not of_type(effects, WriteTopicAssignment)
    # 3 joined the ISR (the leader wrote version 6).
    ctx, effects = handle(ctx, IsrChanged({TP: state(1, 8, [1, 2, 3], version=6)}), 0)
    assert ctx.reassignments == {}
    assert ctx.assignments[T][0] == (2, 3)
    new = ctx.partition_states[TP]
    # The leader (1) is being removed: the first live ISR member of the target leads.
    assert (new.leader, new.leader_epoch, new.isr, new.partition_epoch) == (2, 9, (2, 3), 7)
    (write,) = of_type(effects, WritePartitionStates)
    assert write.updates == {TP: (PartitionStateZnode(2, 9, (2, 3), CONTROLLER_EPOCH), 6)}
    (topic,) = of_type(effects, WriteTopicAssignment)
    assert (topic.expected, topic.assignment) == ({0: (2, 3, 1)}, {0: (2, 3)})
    (plan,) = of_type(effects, WriteReassignmentPlan)
    assert plan.reassignments == {}  # empty: the shell deletes the znode
    # State before topic before plan: a failover in between redoes this step.
    order = [e for e in effects if isinstance(e, WritePartitionStates | WriteTopicAssignment)]
    assert isinstance(order[0], WritePartitionStates)
    assert set(lai_items(effects)) == {2, 3}
    (stop,) = of_type(effects, SendStopReplica)
    assert stop.broker_id == 1
    (topic_state,) = stop.request.topic_states
    assert topic_state.partition_states[0].delete_partition is True


@pytest.mark.parametrize(
    ("leader", "isr", "target", "expected_leader", "expected_isr"),
    [
        pytest.param(2, [1, 2, 3], (2, 3), 2, (2, 3), id="leader-kept-in-target"),
        pytest.param(1, [1, 2, 3], (3, 2), 3, (2, 3), id="leader-removed-first-of-target"),
        pytest.param(1, [1, 2, 3], (1, 3), 1, (1, 3), id="leader-stays"),
    ],
)
def test_completion_leader_table(
    leader: int,
    isr: list[int],
    target: tuple[int, ...],
    expected_leader: int,
    expected_isr: tuple[int, ...],
) -> None:
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2)}}, {TP: state(leader, 7, [1, 2])})
    ctx, _ = handle(ctx, ReassignmentsRequested({TP: target}), 0)
    ctx, _ = handle(ctx, IsrChanged({TP: state(leader, 8, isr, version=6)}), 0)
    new = ctx.partition_states[TP]
    assert (new.leader, new.isr) == (expected_leader, expected_isr)
    assert ctx.assignments[T][0] == target


def test_validation_and_cancel_without_reassignment() -> None:
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2)}}, {TP: state(1, 7, [1, 2])})
    ctx2, effects = handle(
        ctx,
        ReassignmentsRequested(
            {
                (T, 0): None,
                (T, 9): (1, 2),
                ("x", 0): (1,),
                (T, 1): (),
            }
        ),
        0,
    )
    assert reply(effects) == {
        (T, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        (T, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (T, 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert ctx2 == ctx
    for bad in ((), (2, 2), (2, 7)):  # empty, duplicate, unregistered broker
        _, effects = handle(ctx, ReassignmentsRequested({TP: bad}), 0)
        assert reply(effects) == {TP: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    # Same replicas: nothing to do.
    same, effects = handle(ctx, ReassignmentsRequested({TP: (1, 2)}), 0)
    assert reply(effects) == {TP: ErrorCode.NONE} and same == ctx
    idle = ControllerContext(9)
    _, effects = handle(idle, ReassignmentsRequested({TP: (1,)}), 0)
    assert reply(effects) == {TP: ErrorCode.NOT_CONTROLLER}


def test_cancel_reverts_to_the_original_replicas() -> None:
    ctx, _ = started()
    ctx, _ = handle(ctx, IsrChanged({TP: state(1, 8, [1, 2], version=5)}), 0)
    ctx, effects = handle(ctx, ReassignmentsRequested({TP: None}), 0)
    assert reply(effects) == {TP: ErrorCode.NONE}
    assert ctx.reassignments == {}
    assert ctx.assignments[T][0] == (1, 2)
    assert (ctx.partition_states[TP].leader, ctx.partition_states[TP].isr) == (1, (1, 2))
    (stop,) = of_type(effects, SendStopReplica)
    assert stop.broker_id == 3  # the adding replica's log goes


def test_a_new_target_replaces_the_one_in_progress_keeping_the_original() -> None:
    ctx, _ = started()
    ctx, _ = handle(ctx, IsrChanged({TP: state(1, 8, [1, 2], version=5)}), 0)
    ctx, effects = handle(ctx, ReassignmentsRequested({TP: (2, 1)}), 0)
    assert reply(effects) == {TP: ErrorCode.NONE}
    # Target (2, 1) is all in the ISR already: done at once, 3 (the old target) deleted.
    assert ctx.reassignments == {} and ctx.assignments[T][0] == (2, 1)
    assert [s.broker_id for s in of_type(effects, SendStopReplica)] == [3]
    ctx, _ = started()
    ctx, effects = handle(ctx, ReassignmentsRequested({TP: (1, 4)}), 0)
    assert reply(effects) == {TP: ErrorCode.INVALID_REPLICA_ASSIGNMENT}  # 4 is not registered
    ctx, effects = handle(ctx, ReassignmentsRequested({TP: (3, 1)}), 0)
    assert ctx.reassignments == {TP: Reassignment((3, 1), (1, 2))}
    assert ctx.assignments[T][0] == (3, 1, 2)
    assert not of_type(effects, SendStopReplica)


def failover(ctx: ControllerContext, plan: ReassignmentPlan) -> tuple[ControllerContext, list[Any]]:
    event = Elected(
        CONTROLLER_EPOCH + 1,
        EPOCH_ZK_VERSION + 1,
        ctx.live_brokers,
        ctx.assignments,
        ctx.partition_states,
        reassignment_targets=plan.targets,
        reassignment_originals=plan.originals,
        reassignment_throttles=plan.throttles,
    )
    return handle(ControllerContext(CONTROLLER_ID), event, 0)


def test_a_new_controller_resumes_from_the_plan() -> None:
    ctx, _ = started()
    plan = ReassignmentPlan({TP: (2, 3)}, {TP: (1, 2)})
    new, effects = failover(ctx, plan)
    assert new.reassignments == {TP: Reassignment((2, 3), (1, 2))}
    assert new.assignments[T][0] == (2, 3, 1)
    assert not of_type(effects, WriteTopicAssignment)  # phase one was already written
    # ... and completes on the next ISR change.
    now = new.partition_states[TP]
    isr = PartitionState(now.leader, now.leader_epoch, (1, 2, 3), 1, now.partition_epoch + 1)
    new, effects = handle(new, IsrChanged({TP: isr}), 0)
    assert new.assignments[T][0] == (2, 3) and new.reassignments == {}


def test_resume_completes_at_load_and_before_phase_one() -> None:
    # The plan was written but not the topic znode: phase one is (re)done.
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2)}}, {TP: state(1, 7, [1, 2])})
    new, effects = failover(ctx, ReassignmentPlan({TP: (2, 3)}, {TP: (1, 2)}))
    assert new.assignments[T][0] == (2, 3, 1)
    assert len(of_type(effects, WriteTopicAssignment)) == 1
    # Target already in the ISR at load: finished at once.
    ctx, _ = elect(live(1, 2, 3), {T: {0: (2, 3, 1)}}, {TP: state(1, 7, [1, 2, 3])})
    new, effects = failover(ctx, ReassignmentPlan({TP: (2, 3)}, {TP: (1, 2)}))
    assert new.assignments[T][0] == (2, 3) and new.reassignments == {}
    assert [s.broker_id for s in of_type(effects, SendStopReplica)] == [1]
    # Finished, but the plan was not cleaned up: cleaned, removed replicas deleted.
    ctx, _ = elect(live(1, 2, 3), {T: {0: (2, 3)}}, {TP: state(2, 9, [2, 3])})
    new, effects = failover(ctx, ReassignmentPlan({TP: (2, 3)}, {TP: (1, 2)}))
    assert of_type(effects, WriteReassignmentPlan)[0].reassignments == {}
    assert [s.broker_id for s in of_type(effects, SendStopReplica)] == [1]
    # A plan entry for a topic that no longer exists is dropped.
    new, effects = failover(ctx, ReassignmentPlan({("gone", 0): (2, 3)}))
    assert of_type(effects, WriteReassignmentPlan)[0].reassignments == {}


def test_a_reordering_resumed_by_a_new_controller_waits_for_the_isr() -> None:
    """A reassignment to the same replicas in another order (or to a superset) has RS =
    target from phase one on, so the topic znode alone cannot tell it is finished: a new
    controller must wait for the target to be in the ISR (the seeded simulation found a new
    controller completing it with one replica in the ISR)."""
    for original, target in (((2, 3, 1), (1, 3, 2)), ((1, 2), (1, 2, 3))):
        ctx, _ = elect(live(1, 2, 3), {T: {0: target}}, {TP: state(2, 9, [2])})
        new, effects = failover(ctx, ReassignmentPlan({TP: target}, {TP: original}))
        assert new.reassignments == {TP: Reassignment(target, original)}
        assert not of_type(effects, SendStopReplica)
        now = new.partition_states[TP]
        isr = PartitionState(now.leader, now.leader_epoch, (1, 2, 3), 1, now.partition_epoch + 1)
        new, effects = handle(new, IsrChanged({TP: isr}), 0)
        assert new.reassignments == {} and new.assignments[T][0] == target


def test_deleted_topic_drops_its_reassignment() -> None:
    ctx, _ = started()
    ctx, _ = handle(ctx, TopicsChanged({}), 0)
    ctx, effects = handle(ctx, IsrChanged({}), 0)
    assert ctx.reassignments == {}
    assert of_type(effects, WriteReassignmentPlan)[0].reassignments == {}


def test_plan_znode_round_trip_and_errors() -> None:
    plan = ReassignmentPlan({TP: (2, 3), ("u", 1): (1,)}, {TP: (1, 2)})
    assert ReassignmentPlan.decode(plan.encode()) == plan
    kafka = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}'
    assert ReassignmentPlan.decode(kafka) == ReassignmentPlan({TP: (2, 3)})
    for bad in (
        b"[]",
        b'{"partitions":{}}',
        b'{"partitions":[{"topic":"t"}]}',
        b'{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
    ):
        with pytest.raises(ZkDataError):
            ReassignmentPlan.decode(bad)


def test_the_throttle_reaches_every_replica_and_survives_a_failover() -> None:
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2)}}, {TP: state(1, 7, [1, 2])})
    ctx, effects = handle(ctx, ReassignmentsRequested({TP: (2, 3)}, 500_000), 0)
    assert ctx.reassignments[TP].throttle_bytes_per_sec == 500_000
    items = lai_items(effects)
    assert sorted(items) == [1, 2, 3]
    assert {i.replication_throttle_bytes_per_sec for i in items.values()} == {500_000}
    assert items[3].adding_replicas == (3,)
    (written,) = of_type(effects, WriteReassignmentPlan)
    plan = ReassignmentPlan(
        {tp: r.target for tp, r in written.reassignments.items()},
        {tp: r.original for tp, r in written.reassignments.items()},
        {tp: r.throttle_bytes_per_sec for tp, r in written.reassignments.items()},
    )
    decoded = ReassignmentPlan.decode(plan.encode())
    assert decoded.throttles == {TP: 500_000}
    new, effects = failover(ctx, decoded)
    assert new.reassignments[TP].throttle_bytes_per_sec == 500_000
    assert {i.replication_throttle_bytes_per_sec for i in lai_items(effects).values()} == {500_000}
    # Done: the final LeaderAndIsr carries no throttle.
    current = new.partition_states[TP]
    isr_changed = IsrChanged({TP: state(1, current.leader_epoch, [1, 2, 3], version=9)})
    done, effects = handle(new, isr_changed, 0)
    assert TP not in done.reassignments
    assert {i.replication_throttle_bytes_per_sec for i in lai_items(effects).values()} <= {-1}


def test_an_unthrottled_plan_has_no_throttle_field() -> None:
    encoded = ReassignmentPlan({TP: (2, 3)}, {TP: (1, 2)}, {TP: -1}).encode()
    assert b"throttle" not in encoded
    assert ReassignmentPlan.decode(encoded).throttles == {}
