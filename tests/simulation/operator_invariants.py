"""What must hold of the operator's actions (checked as they happen, after every step).

- a controlled shutdown the controller accepted leaves the broker leading only partitions
  with no other ISR member it could elect (live, not shutting down);
- a preferred election answered NONE made the assignment's first replica leader; an unclean
  one answered NONE made a live broker leader;
- a reassignment, once it completes, leaves the partition's ISR inside the target replicas
  with at least min(min.insync.replicas, replication factor) of them;
- a deleted topic's acks are no longer owed (the invariants stop tracking them), and at the
  end no broker keeps a log the assignments do not give it (cluster.py checks that).
"""

from __future__ import annotations

from collections import Counter

from controller import zk_data
from controller.core import (
    ControlledShutdownReply,
    ControllerContext,
    ControllerEvent,
    ElectLeadersReply,
    ElectLeadersRequested,
)
from controller.leading import Reply
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition
from tests.simulation.invariants import Invariants, InvariantViolation
from tests.simulation.world import World

__all__ = ["OperatorInvariants"]


class OperatorInvariants:
    def __init__(self, world: World, invariants: Invariants) -> None:
        self.world = world
        self.invariants = invariants
        world.on_reply.append(self._on_reply)
        self._plan_data: bytes | None = None
        self._plan: dict[TopicPartition, tuple[int, ...]] = {}
        self._topics: set[str] = set(world.zk.assignments)
        self.completed_reassignments = 0
        self.deleted_topics: set[str] = set()
        self.answered: Counter[str] = Counter()  # requests answered NONE, by kind

    def _on_reply(
        self, event: ControllerEvent, reply: Reply | None, ctx: ControllerContext
    ) -> None:
        states = self.world.zk.states
        if isinstance(reply, ControlledShutdownReply) and reply.error_code == ErrorCode.NONE:
            self.answered["controlled shutdowns"] += 1
            electable = ctx.live_brokers.keys() - ctx.shutting_down
            for tp, (znode, _) in sorted(states.items()):
                others = [m for m in znode.isr if m != reply.broker_id and m in electable]
                if znode.leader == reply.broker_id and others:
                    raise InvariantViolation(
                        f"{tp}: b{reply.broker_id} shut down still leading it, while ISR "
                        f"members {others} could lead"
                    )
        if isinstance(reply, ElectLeadersReply) and isinstance(event, ElectLeadersRequested):
            assignments = self.world.zk.assignments
            for tp, code in sorted(reply.results.items()):
                if code != ErrorCode.NONE:
                    continue
                self.answered[f"{event.election_type.name.lower()} elections"] += 1
                leader = states[tp][0].leader
                preferred = assignments[tp.topic][tp.partition][0]
                if event.election_type == ElectionType.PREFERRED and leader != preferred:
                    raise InvariantViolation(f"{tp}: preferred election made b{leader} leader")
                if event.election_type == ElectionType.UNCLEAN and leader not in ctx.live_brokers:
                    raise InvariantViolation(f"{tp}: unclean election made b{leader} leader")

    def done(self) -> dict[str, int]:
        return {
            **self.answered,
            "reassignments completed": self.completed_reassignments,
            "topics deleted": len(self.deleted_topics),
        }

    def check(self) -> None:
        zk = self.world.zk
        topics = set(zk.assignments)
        for topic in self._topics - topics:
            self.deleted_topics.add(topic)
            for tp in [tp for tp in self.invariants.acks if tp.topic == topic]:
                del self.invariants.acks[tp]
        self._topics = topics
        data = zk.data(zk_data.REASSIGN_PARTITIONS_PATH)
        if data == self._plan_data:
            return
        plan = dict(zk_data.ReassignmentPlan.decode(data).targets) if data else {}
        assignments = zk.assignments
        min_isr = self.world.config.min_insync_replicas
        for tp, target in self._plan.items():
            if tp in plan or assignments.get(tp.topic, {}).get(tp.partition) != target:
                continue  # still going, cancelled, or the topic is gone
            self.completed_reassignments += 1
            found = zk.state(tp)
            assert found is not None
            isr = found[0].isr
            if set(isr) - set(target) or len(isr) < min(min_isr, len(target)):
                raise InvariantViolation(
                    f"{tp}: reassignment to {list(target)} completed with ISR {list(isr)}"
                )
        self._plan, self._plan_data = {TopicPartition(*tp): t for tp, t in plan.items()}, data
