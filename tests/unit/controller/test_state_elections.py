"""Preferred and unclean elections on demand, the automatic leader rebalance, and partitions
added to a topic: the controller's pure core."""

from __future__ import annotations

import dataclasses

from controller.core import (
    PREFERRED_REPLICA_IMBALANCE,
    UNCLEAN_LEADER_ELECTION,
    BrokersChanged,
    ControlledShutdownRequested,
    ControllerContext,
    CreatePartitionStates,
    ElectLeadersReply,
    ElectLeadersRequested,
    IsrChanged,
    LeaderImbalanceCheck,
    LogEvent,
    PartitionState,
    Reassignment,
    SendUpdateMetadata,
    TopicsChanged,
    WritePartitionStates,
    handle,
)
from controller.core.leader_balance import leader_imbalance
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from tests.unit.controller.test_state import (
    CONTROLLER_EPOCH,
    elect,
    leader_and_isr,
    live,
    of_type,
    state,
)

PREFERRED = ElectionType.PREFERRED
UNCLEAN = ElectionType.UNCLEAN
T = "t"


def reply(effects: list[object]) -> dict[tuple[str, int], ErrorCode]:
    found = [e for e in effects if isinstance(e, ElectLeadersReply)]
    assert len(found) == 1 and effects[-1] is found[0]  # the answer comes last
    return dict(found[0].results)


def test_preferred_election_moves_leadership_back_to_the_assignment_head() -> None:
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2), 1: (2, 3)}}, {(T, 0): state(2, 7, [2, 1])})
    ctx, effects = handle(ctx, ElectLeadersRequested(PREFERRED, ((T, 0),)), 0)
    assert reply(effects) == {(T, 0): ErrorCode.NONE}
    (write,) = of_type(effects, WritePartitionStates)
    # The ISR is kept, the leader epoch bumped, CAS at the version read.
    assert write.updates == {(T, 0): (PartitionStateZnode(1, 8, (2, 1), CONTROLLER_EPOCH), 4)}
    assert leader_and_isr(effects)[1][(T, 0)] == (1, 8, (2, 1), 5, False)
    assert leader_and_isr(effects)[2][(T, 0)] == (1, 8, (2, 1), 5, False)
    assert ctx.partition_states[(T, 0)].leader == 1
    assert len(of_type(effects, SendUpdateMetadata)) == 1


def test_preferred_election_reports_each_partition() -> None:
    assignments = {T: {0: (1, 2), 1: (2, 1), 2: (3, 1)}}
    states = {(T, 0): state(2, 3, [2]), (T, 1): state(2, 3, [2, 1]), (T, 2): state(1, 3, [1])}
    ctx, _ = elect(live(1, 2), assignments, states)
    ctx, effects = handle(ctx, ElectLeadersRequested(PREFERRED, None), 0)
    assert reply(effects) == {
        (T, 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,  # 1 is live but not in the ISR
        (T, 1): ErrorCode.ELECTION_NOT_NEEDED,
        (T, 2): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,  # 3 is not live
    }
    assert not of_type(effects, WritePartitionStates)
    assert not of_type(effects, SendUpdateMetadata)


def test_unknown_partition_and_not_controller() -> None:
    ctx, _ = elect(live(1, 2), {T: {0: (1, 2)}})
    _, effects = handle(ctx, ElectLeadersRequested(PREFERRED, (("nope", 0), (T, 5))), 0)
    assert set(reply(effects).values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    idle = ControllerContext(9)
    _, effects = handle(idle, ElectLeadersRequested(PREFERRED, ((T, 0),)), 0)
    assert reply(effects) == {(T, 0): ErrorCode.NOT_CONTROLLER}


def test_preferred_election_never_elects_a_broker_shutting_down() -> None:
    ctx, _ = elect(live(1, 2), {T: {0: (1, 2), 1: (2, 1)}}, {(T, 0): state(1, 1, [1, 2])})
    ctx, _ = handle(ctx, ControlledShutdownRequested(1, -1), 0)
    assert ctx.partition_states[(T, 0)].leader == 2
    _, effects = handle(ctx, ElectLeadersRequested(PREFERRED, ((T, 0),)), 0)
    assert reply(effects) == {(T, 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}


def test_unclean_election_on_demand_elects_a_live_replica_out_of_the_isr() -> None:
    ctx, _ = elect(live(2), {T: {0: (1, 2)}}, {(T, 0): state(-1, 4, [1])})
    ctx, effects = handle(ctx, ElectLeadersRequested(UNCLEAN, ((T, 0),)), 0)
    assert reply(effects) == {(T, 0): ErrorCode.NONE}
    assert ctx.partition_states[(T, 0)].leader == 2
    assert ctx.partition_states[(T, 0)].isr == (2,)
    logs = [e for e in of_type(effects, LogEvent) if e.event == UNCLEAN_LEADER_ELECTION]
    assert len(logs) == 1 and logs[0].level == "warning"


def test_unclean_election_not_needed_with_a_live_leader_and_impossible_without_replicas() -> None:
    assignments = {T: {0: (1, 2), 1: (3, 1)}}
    states = {(T, 0): state(1, 4, [1, 2]), (T, 1): state(-1, 4, [3])}
    ctx, _ = elect(live(1, 2), assignments, states)
    ctx, effects = handle(ctx, ElectLeadersRequested(UNCLEAN, ((T, 0), (T, 1))), 0)
    # (T, 1): 1 is live and a replica, so the unclean election elects it.
    assert reply(effects) == {(T, 0): ErrorCode.ELECTION_NOT_NEEDED, (T, 1): ErrorCode.NONE}
    ctx2, _ = elect(live(1, 2), {T: {0: (3, 4)}}, {(T, 0): state(-1, 4, [3])})
    _, effects = handle(ctx2, ElectLeadersRequested(UNCLEAN, ((T, 0),)), 0)
    assert reply(effects) == {(T, 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_leader_imbalance_decision() -> None:
    assignments = {T: {0: (1, 2), 1: (1, 2), 2: (2, 1), 3: (3, 1)}}
    leaders = {(T, 0): 2, (T, 1): 1, (T, 2): 2, (T, 3): 1}
    isrs = {(T, 0): (1, 2), (T, 1): (1, 2), (T, 2): (2, 1), (T, 3): (1,)}
    found = leader_imbalance(assignments, leaders, isrs, {1, 2, 3}, set(), 10)
    assert found.imbalance_count == 2
    assert found.ratios == {1: 0.5, 2: 0.0, 3: 1.0}
    assert found.to_elect == ((T, 0),)  # 3 is not in (T, 3)'s ISR
    assert leader_imbalance(assignments, leaders, isrs, {1, 2, 3}, set(), 50).to_elect == ()
    assert leader_imbalance(assignments, leaders, isrs, {1, 2, 3}, {1}, 0).to_elect == ()
    assert leader_imbalance(assignments, leaders, isrs, {2, 3}, set(), 0).to_elect == ()


def test_imbalance_check_after_a_bounce_restores_preferred_leaders() -> None:
    assignments = {T: {0: (1, 2), 1: (2, 1)}}
    ctx, _ = elect(
        live(1, 2), assignments, {(T, 0): state(1, 1, [1, 2]), (T, 1): state(2, 1, [2, 1])}
    )
    ctx, _ = handle(ctx, BrokersChanged(live(2)), 0)
    assert ctx.partition_states[(T, 0)].leader == 2
    ctx, _ = handle(ctx, BrokersChanged(live(1, 2)), 0)
    # Back, but not in the ISR yet: counted, not elected.
    ctx, effects = handle(ctx, LeaderImbalanceCheck(0), 0)
    (log,) = [e for e in of_type(effects, LogEvent) if e.event == PREFERRED_REPLICA_IMBALANCE]
    assert log.fields["preferred_replica_imbalance_count"] == 1
    assert not of_type(effects, WritePartitionStates)
    # The leader took it back into the ISR (an ISR change), then the next check elects it.
    current = ctx.partition_states[(T, 0)]
    back = PartitionState(2, current.leader_epoch, (2, 1), 1, current.partition_epoch + 1)
    ctx, _ = handle(ctx, IsrChanged({(T, 0): back}), 0)
    ctx, effects = handle(ctx, LeaderImbalanceCheck(0), 0)
    assert ctx.partition_states[(T, 0)].leader == 1
    assert not [e for e in effects if isinstance(e, ElectLeadersReply)]
    ctx, effects = handle(ctx, LeaderImbalanceCheck(0), 0)
    (log,) = [e for e in of_type(effects, LogEvent) if e.event == PREFERRED_REPLICA_IMBALANCE]
    assert log.fields["preferred_replica_imbalance_count"] == 0
    assert not of_type(effects, WritePartitionStates)


def test_imbalance_check_leaves_partitions_being_reassigned_alone() -> None:
    assignments = {T: {0: (1, 2)}}
    ctx, _ = elect(live(1, 2), assignments, {(T, 0): state(2, 1, [2, 1])})
    moving = dataclasses.replace(ctx, reassignments={(T, 0): Reassignment((1, 2), (1, 2))})
    _, effects = handle(moving, LeaderImbalanceCheck(0), 0)
    assert not of_type(effects, WritePartitionStates)
    ctx, effects = handle(ctx, LeaderImbalanceCheck(0), 0)  # the same without the move
    assert ctx.partition_states[(T, 0)].leader == 1


def test_partitions_added_to_a_topic_get_states_and_leaders() -> None:
    ctx, _ = elect(live(1, 2, 3), {T: {0: (1, 2), 1: (2, 3)}})
    before = dict(ctx.partition_states)
    ctx, effects = handle(ctx, TopicsChanged({T: {0: (1, 2), 1: (2, 3), 2: (3, 1)}}), 0)
    (create,) = of_type(effects, CreatePartitionStates)
    assert set(create.states) == {(T, 2)}
    assert ctx.partition_states[(T, 2)].leader == 3
    assert {tp: ctx.partition_states[tp] for tp in before} == before
    assert leader_and_isr(effects)[3][(T, 2)][-1] is True  # is_new
