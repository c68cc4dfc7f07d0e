"""A fake group coordinator for client tests, plugged into FakeCluster (fake_broker.py).

The decisions are the broker's own: a `GroupCoordinatorCore` (broker/core/group) whose
records are applied at once, as if every write to `__consumer_offsets` were committed the
moment it is made. So joins, target assignments and their incremental handover (KIP-848),
fencing (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), commits (STALE_MEMBER_EPOCH; an admin's only
while the group is empty), describing, listing and deleting are what a broker answers. Around
it only what a broker's shell adds: one coordinator broker (`coordinator_id`; the others answer
NOT_COORDINATOR), FindCoordinator, injected errors (FakeCluster.fail_next(api, code) with no
topic), and a record of the commits sent and of what each member reported owning.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from broker.core.group.coordinator import Decision, GroupCoordinatorCore, GroupSettings
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.delete_groups import DeletedGroup, DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
)
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tests.unit.client.fake_broker import FakeCluster

__all__ = ["FakeCoordinator"]

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
_PARTITION = 0  # one __consumer_offsets partition holds every group here
R = TypeVar("R")


class FakeCoordinator:
    def __init__(self, cluster: FakeCluster, coordinator_id: int = 1) -> None:
        self.cluster = cluster
        self.coordinator_id = coordinator_id
        ids = itertools.count(1)
        self.core = GroupCoordinatorCore(
            GroupSettings(num_partitions=1, heartbeat_interval_ms=100),
            lambda: f"member-{next(ids)}",
        )
        self.core.begin_load(_PARTITION)
        self.core.finish_load(_PARTITION, _now_ms())
        self.commits: list[tuple[str, str, int, dict[TopicPartition, int]]] = []
        self.reported: dict[tuple[str, str], frozenset[TopicPartition]] = {}  # last heartbeat's
        self._log_end = 0  # the next offset in the fake __consumer_offsets partition

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.core.settings.heartbeat_interval_ms

    @heartbeat_interval_ms.setter
    def heartbeat_interval_ms(self, value: int) -> None:
        self.core.settings = replace(self.core.settings, heartbeat_interval_ms=value)

    def handles(self, body: Any) -> bool:
        return isinstance(body, GROUP_REQUESTS)

    # ----- what tests look at or arrange --------------------------------------------------------

    def exists(self, group_id: str) -> bool:
        """The coordinator knows the group (members, or committed offsets)."""
        return group_id in self.core.groups or group_id in self.core.offsets

    def member_ids(self, group_id: str) -> set[str]:
        group = self.core.groups.get(group_id)
        return set() if group is None else set(group.members)

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets, as OffsetFetch answers them."""
        return {tp: v.offset for tp, v in self.core.committed_offsets.get(group_id, {}).items()}

    def commit_as_admin(
        self, group_id: str, offsets: Mapping[TopicPartition, int], leader_epoch: int = -1
    ) -> None:
        """Commit as an admin does (no member id, epoch -1); AssertionError if refused."""
        request = OffsetCommitRequest(
            group_id,
            tuple(
                OffsetCommitTopic(
                    topic,
                    tuple(
                        OffsetCommitPartition(tp.partition, offset, leader_epoch)
                        for tp, offset in offsets.items()
                        if tp.topic == topic
                    ),
                )
                for topic in dict.fromkeys(tp.topic for tp in offsets)
            ),
            member_id="",
            member_epoch=-1,
        )
        response = self._apply(self.core.commit(request, self._topics(), _wall_ms()))
        codes = {p.error_code for t in response.topics for p in t.partitions}
        assert codes == {ErrorCode.NONE}, codes

    def owners(self, group_id: str) -> dict[TopicPartition, list[str]]:
        """Who holds each partition now, by the coordinator (assigned or being revoked) or by
        the member's own last report: a partition listed twice is held by two at once."""
        held: dict[TopicPartition, list[str]] = {}
        group = self.core.groups.get(group_id)
        for member in group.members.values() if group is not None else ():
            reported = self.reported.get((group_id, member.member_id), frozenset())
            for tp in member.owns() | reported:
                held.setdefault(tp, []).append(member.member_id)
        return held

    def remove(self, group_id: str, member_id: str) -> None:
        """The member's session timed out: the core's own expiry removes it."""
        now_ms = _now_ms()
        self.core.sessions[(group_id, member_id)] = now_ms
        for decision in self.core.expire(now_ms, wall_ms=_wall_ms(), offsets=False):
            self._apply(decision)
        assert member_id not in self.member_ids(group_id)

    # ----- the APIs ---------------------------------------------------------------------------

    def answer(self, broker_id: int, body: Any) -> Any:
        if isinstance(body, FindCoordinatorRequest):
            return self._find(body)
        if isinstance(body, ListGroupsRequest):
            return self._list(broker_id, body)
        wrong = broker_id != self.coordinator_id
        match body:
            case ConsumerGroupHeartbeatRequest():
                return self._heartbeat(body, wrong)
            case OffsetCommitRequest():
                return self._commit(body, wrong)
            case OffsetFetchRequest():
                code = self._injected(ApiKey.OFFSET_FETCH, wrong)
                return OffsetFetchResponse((), code) if code else self.core.fetch(body)
            case ConsumerGroupDescribeRequest():
                return self._describe(body, wrong)
            case DeleteGroupsRequest():
                return self._delete(body, wrong)
            case OffsetDeleteRequest():
                code = self._injected(ApiKey.OFFSET_DELETE, wrong)
                if code:
                    return OffsetDeleteResponse(code)
                return self._apply(self.core.delete_offsets(body))
        raise AssertionError(f"fake coordinator: unexpected {type(body).__name__}")

    def _injected(self, api: ApiKey, wrong: bool) -> int:
        code = self.cluster._take_injected(api, "", -1)
        return code or (ErrorCode.NOT_COORDINATOR if wrong else 0)

    def _apply(self, decision: Decision[R]) -> R:
        """Write the decision's records and have them committed at once, as the broker's
        shell (broker/group_coordinator.py) does once its write is acknowledged."""
        for key, value in decision.records:
            self.core.replay(key, value, committed=False)
        self.core.records_committed(decision.records, self._log_end)
        self._log_end += len(decision.records)
        return decision.response

    def _topics(self) -> dict[str, int]:
        return {name: len(partitions) for name, partitions in self.cluster.topics.items()}

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
        decision = self.core.heartbeat(
            body, self._topics(), _now_ms(), "/127.0.0.1", wall_ms=_wall_ms()
        )
        response = self._apply(decision)
        if response.error_code == ErrorCode.NONE and body.topic_partitions is not None:
            self.reported[(body.group_id, response.member_id or body.member_id)] = frozenset(
                TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions
            )
        return response

    def _commit(self, body: OffsetCommitRequest, wrong: bool) -> OffsetCommitResponse:
        code = self._injected(ApiKey.OFFSET_COMMIT, wrong)
        if code:
            response = OffsetCommitResponse(
                tuple(
                    OffsetCommitTopicResponse(
                        t.name,
                        tuple(
                            OffsetCommitPartitionResponse(p.partition_index, code)
                            for p in t.partitions
                        ),
                    )
                    for t in body.topics
                )
            )
        else:
            response = self._apply(self.core.commit(body, self._topics(), _wall_ms()))
        committed = {
            TopicPartition(t.name, p.partition_index): p.committed_offset
            for t, answer in zip(body.topics, response.topics, strict=True)
            for p, result in zip(t.partitions, answer.partitions, strict=True)
            if result.error_code == ErrorCode.NONE
        }
        self.commits.append((body.group_id, body.member_id, body.member_epoch, committed))
        return response

    def _describe(
        self, body: ConsumerGroupDescribeRequest, wrong: bool
    ) -> ConsumerGroupDescribeResponse:
        code = self._injected(ApiKey.CONSUMER_GROUP_DESCRIBE, wrong)
        return ConsumerGroupDescribeResponse(
            tuple(
                DescribedGroup(g, code, group_state="Dead") if code else self.core.describe(g)
                for g in body.group_ids
            )
        )

    def _list(self, broker_id: int, body: ListGroupsRequest) -> ListGroupsResponse:
        code = self.cluster._take_injected(ApiKey.LIST_GROUPS, "", -1)
        if code:
            return ListGroupsResponse(code)
        if broker_id != self.coordinator_id:
            return ListGroupsResponse(0, ())
        return ListGroupsResponse(0, tuple(self.core.list_groups(body.states_filter)))

    def _delete(self, body: DeleteGroupsRequest, wrong: bool) -> DeleteGroupsResponse:
        code = self._injected(ApiKey.DELETE_GROUPS, wrong)
        return DeleteGroupsResponse(
            tuple(
                DeletedGroup(g, code or self._apply(self.core.delete_group(g)))
                for g in body.groups_names
            )
        )


def _now_ms() -> int:
    """The coordinator's monotonic clock: the test's trio clock (or, outside a run, 0)."""
    try:
        return int(trio.current_time() * 1000)
    except RuntimeError:
        return 0


def _wall_ms() -> int:
    return int(time.time() * 1000)
