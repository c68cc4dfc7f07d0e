"""A consumer group in the simulation: members that heartbeat, reconcile and commit as
docs/groups.md says, faults of their own (a pause past the session timeout, a restart), and
the group invariants checked after every step:

- no partition is owned by two members, as each coordinator records it, nor as the members
  believe it (a member's belief counts while its last answered heartbeat, counted from when
  it was sent, is within the session timeout);
- a member's epoch never goes down;
- no acknowledged commit is lost: the coordinator of a group holds, for every partition, at
  least the largest offset it ever acknowledged (commits only move forward here).

With `group_classic_members`, Kafka clients of the classic protocol join the same group
(classic_shell.py: JoinGroup, SyncGroup, Heartbeat through broker.core.group.classic), as
librdkafka does: a cooperative one gives up only what SyncGroup no longer gives it, then joins
again; an eager one gives up everything (committing it) before it joins again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.core.group.coordinator import GroupCoordinatorCore, PartitionLoad
from broker.core.group.model import GroupState
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicRequest,
)
from protocol.topic_partition import TopicPartition
from tests.simulation.acl_workload import ADMIN, Authenticated
from tests.simulation.classic_shell import (
    ClassicAnswer,
    SimHeartbeat,
    SimJoinGroup,
    SimSyncGroup,
)
from tests.simulation.invariants import Invariants, InvariantViolation
from tests.simulation.network import CLIENT_NODE
from tests.simulation.world import Ack, World

__all__ = ["GROUP", "GroupWorkload"]

GROUP = "sim-group"
_RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}
_LOST = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}


@dataclass
class Member:
    name: str
    member_id: str = ""
    epoch: int = 0
    owned: set[TopicPartition] = field(default_factory=set)
    revoking: set[TopicPartition] = field(default_factory=set)  # until the next heartbeat
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    coordinator: int | None = None
    in_flight: bool = False
    valid_until_ms: int = -1
    paused_until_ms: int = -1
    generation: int = 0  # a restart forgets everything: answers to older requests are ignored
    epochs: dict[str, int] = field(default_factory=dict)  # member id -> highest epoch seen
    classic: str = ""  # "cooperative" or "eager": a classic member; "": a KIP-848 one
    phase: str = "join"  # a classic member's next request: join, sync or heartbeat


class GroupWorkload:
    def __init__(self, world: World, topic: str, invariants: Invariants) -> None:
        self.world = world
        self.topic = topic
        self.invariants = invariants
        config = world.config
        self.members = [Member(f"c{i}") for i in range(config.group_members)]
        self.members += [
            Member(f"k{i}", classic="cooperative" if i % 2 == 0 else "eager")
            for i in range(config.group_classic_members)
        ]
        # The largest offset committed per partition (the coordinator acknowledged it, HW
        # past its record), with the ack of that record: only while some ISR member that
        # got it has neither crashed nor left the ISR must it survive (as any produce).
        self.acked: dict[TopicPartition, tuple[int, Ack]] = {}
        self._sent: dict[int, dict[TopicPartition, int]] = {}  # id(request) -> its offsets
        world.on_group_commit.append(self._committed)
        self.running = False
        self.counts = {"rebalances": 0, "lost": 0, "commits": 0, "committed": 0, "faults": 0}
        if config.group_classic_members:
            self.counts |= {"classic joins": 0, "classic revocations": 0, "eager give-ups": 0}

    def start(self) -> None:
        self.running = True
        for member in self.members:
            self._schedule(
                member, self.world.draw((1, self.world.config.group_heartbeat_interval_ms))
            )
            self._schedule_commit(member)
        self._schedule_fault()

    # -- the members ---------------------------------------------------------------------------

    def _schedule(self, member: Member, delay_ms: int) -> None:
        generation = member.generation

        def tick() -> None:
            if member.generation == generation:
                self._tick(member)

        self.world.scheduler.after(delay_ms, f"{member.name} heartbeats", tick)

    def _tick(self, member: Member) -> None:
        interval = self.world.config.group_heartbeat_interval_ms
        if self.world.now_ms >= member.paused_until_ms:
            self._heartbeat(member)
        self._schedule(member, interval)

    def _request(
        self,
        member: Member,
        dst: int,
        payload: object,
        on_answer: Callable[[Any], None],
        *,
        heartbeat: bool = False,
    ) -> None:
        """`heartbeat`: the request in flight that `member.in_flight` stands for."""
        generation = member.generation

        def answered(response: object) -> None:
            if member.generation != generation:
                return
            if self.world.now_ms < member.paused_until_ms:  # a paused process reads nothing
                member.in_flight = member.in_flight and not heartbeat
                return
            on_answer(response)

        def timed_out() -> None:
            if member.generation == generation:
                member.in_flight = member.in_flight and not heartbeat
                member.coordinator = None

        label = f"{type(payload).__name__} {member.name} -> b{dst}"
        if self.world.config.authorizer:  # the members connect as a super user
            payload = Authenticated(ADMIN, payload)
        self.world.net.request(
            CLIENT_NODE,
            dst,
            payload,
            timeout_ms=self.world.config.request_timeout_ms,
            on_response=answered,
            on_timeout=timed_out,
            label=label,
        )

    def _heartbeat(self, member: Member) -> None:
        if member.in_flight:
            return
        alive = [b for b, broker in sorted(self.world.brokers.items()) if broker.alive]
        if not alive:
            return
        member.in_flight = True
        if member.coordinator is None:
            self._request(
                member,
                self.world.rng.choice(alive),
                FindCoordinatorRequest((GROUP,)),
                lambda r: self._found(member, r),
                heartbeat=True,
            )
            return
        if member.classic:
            return self._classic(member)
        joining = member.epoch == 0
        member.revoking = set()  # let go (committed on revoke) before saying so
        sent_ms = self.world.now_ms
        request = ConsumerGroupHeartbeatRequest(
            GROUP,
            member.member_id,
            member.epoch,
            rebalance_timeout_ms=self.world.config.group_rebalance_timeout_ms if joining else -1,
            subscribed_topic_names=(self.topic,) if joining else None,
            topic_partitions=_wire(member.owned),
        )
        self._request(
            member,
            member.coordinator,
            request,
            lambda r: self._answered(member, r, sent_ms),
            heartbeat=True,
        )

    def _found(self, member: Member, response: FindCoordinatorResponse) -> None:
        member.in_flight = False
        found = response.coordinators[0]
        if found.error_code == ErrorCode.NONE:
            member.coordinator = found.node_id

    def _answered(
        self, member: Member, response: ConsumerGroupHeartbeatResponse, sent_ms: int
    ) -> None:
        member.in_flight = False
        code = ErrorCode(response.error_code)
        if code in _RETRIABLE:
            member.coordinator = None
            return
        if code in _LOST:
            self._lose(member)
            return
        if code != ErrorCode.NONE:
            raise InvariantViolation(f"{member.name}: unexpected heartbeat error {code.name}")
        assert response.member_id is not None
        seen = member.epochs.get(response.member_id, -1)
        if response.member_epoch < seen:
            raise InvariantViolation(
                f"{member.name}: member epoch went from {seen} to {response.member_epoch}"
            )
        member.epochs[response.member_id] = response.member_epoch
        member.member_id, member.epoch = response.member_id, response.member_epoch
        member.valid_until_ms = sent_ms + self.world.config.group_session_timeout_ms
        if response.assignment is None:
            return
        new = {
            TopicPartition(t.topic, p)
            for t in response.assignment.topic_partitions
            for p in t.partitions
        }
        revoked, gained = member.owned - new, new - member.owned
        if revoked or gained:
            self.counts["rebalances"] += 1
        if revoked:  # commit what it processed, then say so at the next heartbeat (soon)
            self._commit(member, revoked)
            member.revoking = revoked
            for tp in revoked:
                member.positions.pop(tp, None)
            self._schedule(member, 1)
        member.owned = new
        if gained:
            self._fetch_positions(member, gained)

    # -- classic members -----------------------------------------------------------------------

    def _classic(self, member: Member) -> None:
        """Its next request, as librdkafka's classic consumer sends them."""
        assert member.coordinator is not None
        sent_ms = self.world.now_ms
        request: object
        if member.phase == "join":
            if member.classic == "eager" and member.owned:
                # An eager member gives up everything before it joins (on_revoke commits).
                self.counts["eager give-ups"] += 1
                self._commit(member, set(member.owned))
                member.owned, member.positions = set(), {}
            request = SimJoinGroup(
                GROUP,
                member.member_id,
                ("cooperative-sticky",) if member.classic == "cooperative" else ("range",),
                (self.topic,),
                tuple(sorted(member.owned)),
                self.world.config.group_rebalance_timeout_ms,
            )
        elif member.phase == "sync":
            request = SimSyncGroup(GROUP, member.member_id, member.epoch)
        else:
            request = SimHeartbeat(GROUP, member.member_id, member.epoch)
        self._request(
            member,
            member.coordinator,
            request,
            lambda r: self._classic_answered(member, request, r, sent_ms),
            heartbeat=True,
        )

    def _classic_answered(
        self, member: Member, request: object, answer: ClassicAnswer, sent_ms: int
    ) -> None:
        member.in_flight = False
        code = ErrorCode(answer.error_code)
        if code in _RETRIABLE:
            member.coordinator = None
            return
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self._lose(member)  # librdkafka: its partitions are lost; it joins again
            return
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            member.valid_until_ms = sent_ms + self.world.config.group_session_timeout_ms
            member.phase = "join"
            self._schedule(member, 1)
            return
        if code != ErrorCode.NONE:
            raise InvariantViolation(f"{member.name}: unexpected classic error {code.name}")
        member.valid_until_ms = sent_ms + self.world.config.group_session_timeout_ms
        if isinstance(request, SimJoinGroup):
            self.counts["classic joins"] += 1
            seen = member.epochs.get(answer.member_id, -1)
            if answer.generation_id < seen:
                raise InvariantViolation(
                    f"{member.name}: generation went from {seen} to {answer.generation_id}"
                )
            member.epochs[answer.member_id] = answer.generation_id
            member.member_id, member.epoch = answer.member_id, answer.generation_id
            member.phase = "sync"
            self._schedule(member, 1)
        elif isinstance(request, SimSyncGroup):
            new = set(answer.assignment)
            revoked, gained = member.owned - new, new - member.owned
            if revoked or gained:
                self.counts["rebalances"] += 1
            member.phase = "heartbeat"
            if revoked:  # cooperative: commit and let go, then join again to say so
                self.counts["classic revocations"] += 1
                self._commit(member, revoked)
                for tp in revoked:
                    member.positions.pop(tp, None)
                member.phase = "join"
                self._schedule(member, 1)
            member.owned = new
            if gained:
                self._fetch_positions(member, gained)

    def _lose(self, member: Member) -> None:
        """Fenced: its partitions may be someone else's already; it rejoins from scratch."""
        self.counts["lost"] += 1
        member.member_id, member.epoch = "", 0
        member.owned, member.revoking, member.positions = set(), set(), {}
        member.valid_until_ms = -1
        member.phase = "join"

    def _fetch_positions(self, member: Member, partitions: set[TopicPartition]) -> None:
        if member.coordinator is None:
            return
        request = OffsetFetchRequest(
            GROUP,
            (OffsetFetchTopicRequest(self.topic, tuple(sorted(p.partition for p in partitions))),),
        )

        def answered(response: OffsetFetchResponse) -> None:
            if response.error_code != ErrorCode.NONE:
                return  # positions stay unknown: it fetches again with its next assignment
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp in member.owned:
                        member.positions[tp] = max(p.committed_offset, 0)

        self._request(member, member.coordinator, request, answered)

    # -- commits -------------------------------------------------------------------------------

    def _schedule_commit(self, member: Member) -> None:
        def tick() -> None:
            if self.running and self.world.now_ms >= member.paused_until_ms:
                unknown = member.owned - member.positions.keys()
                if unknown:  # a fetch of its committed offsets failed: again
                    self._fetch_positions(member, unknown)
                self._commit(member, set(member.owned))
            if self.running:
                self._schedule_commit(member)

        delay_ms = self.world.draw(self.world.config.group_commit_interval_ms)
        self.world.scheduler.after(delay_ms, f"{member.name} commits", tick)

    def _commit(self, member: Member, partitions: Iterable[TopicPartition]) -> None:
        wanted = sorted(tp for tp in partitions if tp in member.positions)
        if not wanted or member.coordinator is None or member.epoch <= 0:
            return
        for tp in wanted:
            member.positions[tp] += self.world.draw((1, 5))  # it processed some records
        offsets = {tp: member.positions[tp] for tp in wanted}
        request = OffsetCommitRequest(
            GROUP,
            (
                OffsetCommitTopic(
                    self.topic,
                    tuple(OffsetCommitPartition(tp.partition, o) for tp, o in offsets.items()),
                ),
            ),
            member.epoch,
            member.member_id,
        )

        def answered(response: OffsetCommitResponse) -> None:
            self.counts["commits"] += sum(
                1 for t in response.topics for p in t.partitions if p.error_code == 0
            )

        self._sent[id(request)] = offsets
        self._request(member, member.coordinator, request, answered)

    def _committed(self, request: object, ack: Ack) -> None:
        self.counts["committed"] += 1
        for tp, offset in self._sent.get(id(request), {}).items():
            if offset > self.acked.get(tp, (-1, ack))[0]:
                self.acked[tp] = (offset, ack)

    # -- faults --------------------------------------------------------------------------------

    def _schedule_fault(self) -> None:
        def fault() -> None:
            if not self.running:
                return
            member = self.world.rng.choice(self.members)
            self.counts["faults"] += 1
            if self.world.rng.random() < 0.5:  # a pause, maybe past the session timeout
                pause_ms = self.world.draw(self.world.config.group_pause_ms)
                member.paused_until_ms = self.world.now_ms + pause_ms
                self.world.trace(f"{member.name} paused for {pause_ms} ms")
            else:  # a restart: a new member from scratch
                member.generation += 1
                member.in_flight = False
                self._lose(member)
                member.coordinator = None
                self._schedule(member, 1)
                self.world.trace(f"{member.name} restarted")
            self._schedule_fault()

        delay_ms = self.world.draw(self.world.config.group_fault_interval_ms)
        self.world.scheduler.after(delay_ms, "group fault", fault)

    def quiet(self) -> None:
        """No more faults; paused members resume."""
        self.running = False
        for member in self.members:
            member.paused_until_ms = -1

    # -- invariants ----------------------------------------------------------------------------

    def check(self) -> None:
        now_ms = self.world.now_ms
        believed: dict[TopicPartition, str] = {}
        for member in self.members:
            if now_ms >= member.valid_until_ms:
                continue
            for tp in member.owned | member.revoking:
                if tp in believed:
                    raise InvariantViolation(
                        f"{tp} is owned by {believed[tp]} and {member.name} at once"
                    )
                believed[tp] = member.name
        for broker_id, core in self._coordinators():
            group = core.groups.get(GROUP)
            if group is not None:
                owners = {}
                for m in group.members.values():
                    for tp in m.owns():
                        if tp in owners:
                            raise InvariantViolation(
                                f"b{broker_id}: {tp} owned by {owners[tp]} and {m.member_id}"
                            )
                        owners[tp] = m.member_id
            committed = core.committed_offsets.get(GROUP, {})
            for tp, (acked, ack) in self.acked.items():
                if not self._protected(ack):
                    continue
                value = committed.get(tp)
                if value is None or value.offset < acked:
                    raise InvariantViolation(
                        f"b{broker_id} coordinates {GROUP} with {tp} at "
                        f"{None if value is None else value.offset}, but {acked} was acknowledged"
                    )

    def _protected(self, ack: Ack) -> bool:
        return any(t.ack is ack and t.holders for t in self.invariants.acks.get(ack.tp, ()))

    def _coordinators(self) -> list[tuple[int, GroupCoordinatorCore]]:
        out = []
        for broker_id, broker in sorted(self.world.brokers.items()):
            groups = broker.groups if broker.alive else None
            if groups is None:
                continue
            p = groups.core.partition_of(GROUP)
            if groups.core.partitions.get(p) is PartitionLoad.LOADED:
                out.append((broker_id, groups.core))
        return out

    def not_converged(self, partitions: int) -> str | None:
        """Why the group is not settled: every member in, stable, the topic's partitions
        spread evenly and owned as the coordinator says."""
        coordinators = self._coordinators()
        if len(coordinators) != 1:
            return f"{len(coordinators)} coordinators of {GROUP}"
        _, core = coordinators[0]
        group = core.groups.get(GROUP)
        if group is None or group.state != GroupState.STABLE:
            return f"group state {None if group is None else group.state.value}"
        if len(group.members) != len(self.members):
            return f"{len(group.members)} members of {len(self.members)}"
        for member in self.members:
            recorded = group.members.get(member.member_id)
            if recorded is None or recorded.assigned != member.owned:
                return f"{member.name} owns {sorted(member.owned)}, coordinator says otherwise"
        sizes = [len(m.owned) for m in self.members]
        if max(sizes) - min(sizes) > 1 or sum(sizes) != partitions:
            return f"unbalanced: {sizes}"
        return None


def _wire(owned: set[TopicPartition]) -> tuple[TopicPartitions, ...]:
    by: dict[str, list[int]] = {}
    for tp in sorted(owned):
        by.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in by.items())
