"""A fake group coordinator for client tests, plugged into FakeCluster (fake_broker.py).

docs/groups.md, simplified: one coordinator broker (`coordinator_id`; others answer
NOT_COORDINATOR), groups in memory. The target assignment spreads the subscribed partitions
round robin over the members sorted by id; a member is given a partition only once no other
member holds it (in what it reported owning or what it was last told to own), so handover is
incremental as KIP-848's. Each new assignment sent bumps the member's epoch; a heartbeat with
another epoch is FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID. Commits: a member's
with its id and current epoch (older: STALE_MEMBER_EPOCH), an admin's (id "", epoch -1) only
while the group has no members. Injected errors: FakeCluster.fail_next(api, code) with no topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    DescribedMember,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicPartitions,
)
from protocol.messages.delete_groups import DeletedGroup, DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
)
from protocol.messages.offset_delete import (
    OffsetDeletePartitionResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteTopicResponse,
)
from protocol.messages.offset_fetch import (
    OffsetFetchPartition,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
)
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tests.unit.client.fake_broker import FakeCluster

__all__ = ["FakeCoordinator", "FakeGroup", "FakeMember"]

GROUP_REQUESTS = (
    FindCoordinatorRequest,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ConsumerGroupDescribeRequest,
    ListGroupsRequest,
    DeleteGroupsRequest,
    OffsetDeleteRequest,
)


@dataclass
class FakeMember:
    member_id: str
    epoch: int
    topics: tuple[str, ...] = ()
    regex: str | None = None
    instance_id: str | None = None
    client_id: str = ""
    owned: frozenset[TopicPartition] = frozenset()  # as last reported
    assigned: frozenset[TopicPartition] | None = None  # as last sent
    heartbeats: int = 0


@dataclass
class FakeGroup:
    group_id: str
    members: dict[str, FakeMember] = field(default_factory=dict)
    offsets: dict[TopicPartition, tuple[int, int, str | None]] = field(default_factory=dict)
    epoch: int = 0


class FakeCoordinator:
    def __init__(self, cluster: FakeCluster, coordinator_id: int = 1) -> None:
        self.cluster = cluster
        self.coordinator_id = coordinator_id
        self.groups: dict[str, FakeGroup] = {}
        self.heartbeat_interval_ms = 100
        self.commits: list[tuple[str, str, int, dict[TopicPartition, int]]] = []
        self._next_member = 1

    def handles(self, body: Any) -> bool:
        return isinstance(body, GROUP_REQUESTS)

    def group(self, group_id: str) -> FakeGroup:
        return self.groups.setdefault(group_id, FakeGroup(group_id))

    def owners(self, group_id: str) -> dict[TopicPartition, list[str]]:
        """Who holds each partition now (reported or told): never more than one member."""
        held: dict[TopicPartition, list[str]] = {}
        for member in self.groups[group_id].members.values():
            for tp in member.owned | (member.assigned or frozenset()):
                held.setdefault(tp, []).append(member.member_id)
        return held

    def remove(self, group_id: str, member_id: str) -> None:
        """The member's session timed out: it is gone, its partitions free."""
        del self.groups[group_id].members[member_id]

    def answer(self, broker_id: int, body: Any) -> Any:
        if isinstance(body, FindCoordinatorRequest):
            return self._find(body)
        if isinstance(body, ListGroupsRequest):
            return self._list(broker_id)
        wrong = broker_id != self.coordinator_id
        match body:
            case ConsumerGroupHeartbeatRequest():
                return self._heartbeat(body, wrong)
            case OffsetCommitRequest():
                return self._commit(body, wrong)
            case OffsetFetchRequest():
                return self._fetch(body, wrong)
            case ConsumerGroupDescribeRequest():
                return self._describe(body, wrong)
            case DeleteGroupsRequest():
                return self._delete(body, wrong)
            case OffsetDeleteRequest():
                return self._delete_offsets(body, wrong)
        raise AssertionError(f"fake coordinator: unexpected {type(body).__name__}")

    def _injected(self, api: ApiKey, wrong: bool) -> int:
        code = self.cluster._take_injected(api, "", -1)
        return code or (ErrorCode.NOT_COORDINATOR if wrong else 0)

    # ----- the APIs ---------------------------------------------------------------------------

    def _find(self, body: FindCoordinatorRequest) -> FindCoordinatorResponse:
        code = self.cluster._take_injected(ApiKey.FIND_COORDINATOR, "", -1)
        node = self.coordinator_id
        return FindCoordinatorResponse(
            tuple(
                Coordinator(key, node, "127.0.0.1", self.cluster.ports[node], code)
                if code == 0
                else Coordinator(key, -1, "", -1, code)
                for key in body.coordinator_keys
            )
        )

    def _heartbeat(
        self, body: ConsumerGroupHeartbeatRequest, wrong: bool
    ) -> ConsumerGroupHeartbeatResponse:
        code = self._injected(ApiKey.CONSUMER_GROUP_HEARTBEAT, wrong)
        if code:
            return ConsumerGroupHeartbeatResponse(code)
        group = self.group(body.group_id)
        if body.member_epoch == 0:
            member = FakeMember(f"member-{self._next_member}", 0)
            self._next_member += 1
            group.members[member.member_id] = member
            group.epoch += 1
        else:
            found = group.members.get(body.member_id)
            if found is None:
                return ConsumerGroupHeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID)
            member = found
            if body.member_epoch in (-1, -2):
                del group.members[member.member_id]
                group.epoch += 1
                return ConsumerGroupHeartbeatResponse(0, None, member.member_id, body.member_epoch)
            if body.member_epoch != member.epoch:
                return ConsumerGroupHeartbeatResponse(ErrorCode.FENCED_MEMBER_EPOCH)
        member.heartbeats += 1
        member.instance_id = body.instance_id
        member.client_id = body.client_id
        if body.subscribed_topic_names is not None or body.subscribed_topic_regex:
            member.topics = body.subscribed_topic_names or ()
            member.regex = body.subscribed_topic_regex or None
            group.epoch += 1
        if body.topic_partitions is not None:
            member.owned = frozenset(
                TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions
            )
        wanted = self._target(group).get(member.member_id, frozenset())
        held_by_others: set[TopicPartition] = set()
        for other in group.members.values():
            if other is not member:
                held_by_others |= other.owned | (other.assigned or frozenset())
        # Revocations first (what it must let go of), then only free partitions.
        allowed = frozenset(tp for tp in wanted if tp not in held_by_others)
        assignment = None
        if allowed != member.assigned:
            member.assigned = allowed
            member.epoch += 1
            assignment = HeartbeatAssignment(_by_topic(allowed))
        return ConsumerGroupHeartbeatResponse(
            0, None, member.member_id, member.epoch, self.heartbeat_interval_ms, assignment
        )

    def _target(self, group: FakeGroup) -> dict[str, frozenset[TopicPartition]]:
        members = sorted(group.members)
        out: dict[str, set[TopicPartition]] = {m: set() for m in members}
        partitions = sorted(
            TopicPartition(topic, p)
            for topic, parts in self.cluster.topics.items()
            if any(self._subscribes(group.members[m], topic) for m in members)
            for p in parts
        )
        eligible_by_tp = {
            tp: [m for m in members if self._subscribes(group.members[m], tp.topic)]
            for tp in partitions
        }
        for i, tp in enumerate(partitions):
            eligible = eligible_by_tp[tp]
            out[eligible[i % len(eligible)]].add(tp)
        return {m: frozenset(tps) for m, tps in out.items()}

    @staticmethod
    def _subscribes(member: FakeMember, topic: str) -> bool:
        if member.regex is not None:
            return re.fullmatch(member.regex, topic) is not None
        return topic in member.topics

    def _commit(self, body: OffsetCommitRequest, wrong: bool) -> OffsetCommitResponse:
        code = self._injected(ApiKey.OFFSET_COMMIT, wrong)
        group = self.group(body.group_id)
        if not code:
            if body.member_id == "" and body.member_epoch == -1:
                code = ErrorCode.UNKNOWN_MEMBER_ID if group.members else 0
            else:
                member = group.members.get(body.member_id)
                if member is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif body.member_epoch < member.epoch:
                    code = ErrorCode.STALE_MEMBER_EPOCH
        committed: dict[TopicPartition, int] = {}
        topics = []
        for t in body.topics:
            answers = []
            for p in t.partitions:
                pcode = code
                if not pcode and p.partition_index not in self.cluster.topics.get(t.name, {}):
                    pcode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if not pcode and p.committed_offset < 0:
                    pcode = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
                if not pcode:
                    tp = TopicPartition(t.name, p.partition_index)
                    group.offsets[tp] = (
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata,
                    )
                    committed[tp] = p.committed_offset
                answers.append(OffsetCommitPartitionResponse(p.partition_index, pcode))
            topics.append(OffsetCommitTopicResponse(t.name, tuple(answers)))
        self.commits.append((body.group_id, body.member_id, body.member_epoch, committed))
        return OffsetCommitResponse(tuple(topics))

    def _fetch(self, body: OffsetFetchRequest, wrong: bool) -> OffsetFetchResponse:
        code = self._injected(ApiKey.OFFSET_FETCH, wrong)
        if code:
            return OffsetFetchResponse((), code)
        group = self.groups.get(body.group_id, FakeGroup(body.group_id))
        if body.topics is None:
            wanted = sorted(group.offsets)
        else:
            wanted = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        by_topic: dict[str, list[OffsetFetchPartition]] = {}
        for tp in wanted:
            offset, epoch, metadata = group.offsets.get(tp, (-1, -1, None))
            by_topic.setdefault(tp.topic, []).append(
                OffsetFetchPartition(tp.partition, offset, 0, epoch, metadata)
            )
        return OffsetFetchResponse(
            tuple(OffsetFetchTopic(t, tuple(ps)) for t, ps in by_topic.items())
        )

    def _state(self, group: FakeGroup) -> str:
        if not group.members:
            return "Empty"
        target = self._target(group)
        settled = all(
            m.owned == target.get(m.member_id, frozenset()) for m in group.members.values()
        )
        return "Stable" if settled else "Reconciling"

    def _describe(
        self, body: ConsumerGroupDescribeRequest, wrong: bool
    ) -> ConsumerGroupDescribeResponse:
        code = self._injected(ApiKey.CONSUMER_GROUP_DESCRIBE, wrong)
        out = []
        for group_id in body.group_ids:
            group = self.groups.get(group_id)
            if code or group is None:
                out.append(
                    DescribedGroup(
                        group_id, code or ErrorCode.GROUP_ID_NOT_FOUND, group_state="Dead"
                    )
                )
                continue
            target = self._target(group)
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.instance_id,
                    m.epoch,
                    m.client_id,
                    "/127.0.0.1",
                    m.topics,
                    m.regex,
                    _by_topic(m.owned),
                    _by_topic(target.get(m.member_id, frozenset())),
                )
                for m in sorted(group.members.values(), key=lambda m: m.member_id)
            )
            out.append(
                DescribedGroup(
                    group_id,
                    0,
                    None,
                    self._state(group),
                    group.epoch,
                    group.epoch,
                    "uniform",
                    members,
                )
            )
        return ConsumerGroupDescribeResponse(tuple(out))

    def _list(self, broker_id: int) -> ListGroupsResponse:
        code = self.cluster._take_injected(ApiKey.LIST_GROUPS, "", -1)
        if code:
            return ListGroupsResponse(code)
        if broker_id != self.coordinator_id:
            return ListGroupsResponse(0, ())
        return ListGroupsResponse(
            0,
            tuple(
                ListedGroup(g.group_id, group_state=self._state(g))
                for g in sorted(self.groups.values(), key=lambda g: g.group_id)
            ),
        )

    def _delete(self, body: DeleteGroupsRequest, wrong: bool) -> DeleteGroupsResponse:
        code = self._injected(ApiKey.DELETE_GROUPS, wrong)
        results = []
        for group_id in body.groups_names:
            group = self.groups.get(group_id)
            result = code
            if not result:
                if group is None:
                    result = ErrorCode.GROUP_ID_NOT_FOUND
                elif group.members:
                    result = ErrorCode.NON_EMPTY_GROUP
                else:
                    del self.groups[group_id]
            results.append(DeletedGroup(group_id, result))
        return DeleteGroupsResponse(tuple(results))

    def _delete_offsets(self, body: OffsetDeleteRequest, wrong: bool) -> OffsetDeleteResponse:
        code = self._injected(ApiKey.OFFSET_DELETE, wrong)
        group = self.groups.get(body.group_id)
        if code or group is None:
            return OffsetDeleteResponse(code or ErrorCode.GROUP_ID_NOT_FOUND)
        topics = []
        for t in body.topics:
            subscribed = any(self._subscribes(m, t.name) for m in group.members.values())
            answers = []
            for p in t.partitions:
                if subscribed:
                    answers.append(
                        OffsetDeletePartitionResponse(
                            p.partition_index, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                        )
                    )
                    continue
                group.offsets.pop(TopicPartition(t.name, p.partition_index), None)
                answers.append(OffsetDeletePartitionResponse(p.partition_index, 0))
            topics.append(OffsetDeleteTopicResponse(t.name, tuple(answers)))
        return OffsetDeleteResponse(0, tuple(topics))


def _by_topic(partitions: frozenset[TopicPartition]) -> tuple[TopicPartitions, ...]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(grouped.items()))
