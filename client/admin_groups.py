"""The admin client's consumer-group operations (Kafka's Admin listConsumerGroups,
describeConsumerGroups, listConsumerGroupOffsets, alterConsumerGroupOffsets,
deleteConsumerGroups, deleteConsumerGroupOffsets), mixed into client.admin.Admin.

ListGroups goes to every broker (each lists the groups it coordinates); everything else to the
group's coordinator (client/consumer/coordinator.py, looked up again when it moves). Offsets
are changed from outside the group (member id "", epoch -1): the coordinator accepts that only
while the group has no members. docs/groups.md is the contract.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import trio

from client.consumer.commits import (
    ADMIN_MEMBER,
    OffsetAndMetadata,
    Offsets,
    commit_offsets,
    fetch_committed,
    to_offsets,
)
from client.consumer.coordinator import Coordinator
from client.errors import error_for_code
from client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo
from client.network import BrokerConnectionError
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)
from protocol.messages.consumer_group_heartbeat import TopicPartitions
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.fetch import CONSUMER_REPLICA_ID
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_delete import (
    OffsetDeletePartition,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
)
from protocol.topic_partition import TopicPartition

__all__ = [
    "GroupAdmin",
    "GroupDescription",
    "GroupListing",
    "GroupOffset",
    "ListGroupsResult",
    "MemberDescription",
]

T = TypeVar("T")
DEAD = "Dead"  # the state of a group that does not exist


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str  # Empty, Assigning, Reconciling, Stable
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    groups: tuple[GroupListing, ...]
    # Brokers that did not answer (their groups are missing from `groups`): id -> why.
    errors: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    subscribed_regex: str | None
    assignment: tuple[TopicPartition, ...]  # what it owns now
    target_assignment: tuple[TopicPartition, ...]  # what it will own once reconciled


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str  # Empty, Assigning, Reconciling, Stable; Dead: no such group
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[MemberDescription, ...]
    coordinator: BrokerInfo | None

    @property
    def exists(self) -> bool:
        return self.state != DEAD


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """A partition's committed offset in a group and how far behind the high watermark
    (what a consumer can read up to) it is."""

    topic: str
    partition: int
    committed_offset: int | None  # None: nothing committed
    high_watermark: int | None  # None: its leader did not answer (or no such partition)
    metadata: str | None = None
    leader_epoch: int | None = None

    @property
    def lag(self) -> int | None:
        if self.committed_offset is None or self.high_watermark is None:
            return None
        return max(0, self.high_watermark - self.committed_offset)


def _partitions(topics: Iterable[TopicPartitions]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(t.topic, p) for t in topics for p in t.partitions))


def _description(described: DescribedGroup, coordinator: BrokerInfo | None) -> GroupDescription:
    return GroupDescription(
        described.group_id,
        described.group_state or DEAD,
        described.group_epoch,
        described.assignment_epoch,
        described.assignor_name,
        tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                m.subscribed_topic_regex,
                _partitions(m.assignment),
                _partitions(m.target_assignment),
            )
            for m in described.members
        ),
        coordinator,
    )


class GroupAdmin:
    """The consumer-group half of Admin (which provides `metadata` and the offset helpers)."""

    metadata: ClusterMetadata
    request_timeout_ms: int

    async def _latest_offsets(
        self, broker: int, parts: Sequence[PartitionInfo], replica_id: int, timeout_ms: int
    ) -> dict[tuple[str, int], int]:
        raise NotImplementedError  # Admin's

    async def _with_coordinator(
        self, group_id: str, use: Callable[[Coordinator], Awaitable[T]]
    ) -> T:
        coordinator = Coordinator(
            self.metadata,
            group_id,
            request_timeout_ms=self.request_timeout_ms,
            retry_backoff_ms=self.metadata.retry_backoff_ms,
        )
        try:
            return await use(coordinator)
        finally:
            await coordinator.aclose()

    async def list_groups(self, states: Iterable[str] = ()) -> ListGroupsResult:
        """Every group of the cluster (ListGroups to each broker, concurrently), optionally
        only those in `states`; brokers that do not answer are named in `errors`."""
        await self.metadata.refresh()
        request = ListGroupsRequest(tuple(states))
        groups: list[GroupListing] = []
        errors: dict[int, str] = {}

        async def ask(broker: int) -> None:
            deadline = trio.current_time() + self.request_timeout_ms / 1000
            while True:
                try:
                    response: ListGroupsResponse = await self.metadata.request(
                        broker, request, timeout_ms=self.request_timeout_ms
                    )
                except BrokerConnectionError as exc:
                    errors[broker] = str(exc)
                    return
                code = response.error_code
                if code == ErrorCode.NONE:
                    groups.extend(
                        GroupListing(g.group_id, g.group_state, broker) for g in response.groups
                    )
                    return
                if not ErrorCode(code).retriable or trio.current_time() > deadline:
                    errors[broker] = ErrorCode(code).name
                    return
                await trio.sleep(self.metadata.retry_backoff_ms / 1000)

        async with trio.open_nursery() as nursery:
            for broker in sorted(self.metadata.brokers):
                nursery.start_soon(ask, broker)
        return ListGroupsResult(tuple(sorted(groups, key=lambda g: g.group_id)), errors)

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """State, epochs, assignor and members (with what each owns and will own) of each
        group, from its coordinator; a group that does not exist is described as Dead."""
        wanted = list(dict.fromkeys(group_ids))
        found: dict[str, GroupDescription] = {}

        async def describe(group_id: str) -> None:
            async def use(coordinator: Coordinator) -> GroupDescription:
                response: ConsumerGroupDescribeResponse = await coordinator.call(
                    lambda: ConsumerGroupDescribeRequest((group_id,)),
                    lambda r: r.groups[0].error_code if r.groups else 0,
                    self.request_timeout_ms,
                    "describe the group",
                )
                (described,) = response.groups
                code = described.error_code
                if code not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                    raise error_for_code(
                        code, f"describe group {group_id!r}", described.error_message
                    )
                if code == ErrorCode.GROUP_ID_NOT_FOUND:
                    described = DescribedGroup(group_id, code, group_state=DEAD)
                return _description(described, coordinator.node)

            found[group_id] = await self._with_coordinator(group_id, use)

        async with trio.open_nursery() as nursery:
            for group_id in wanted:
                nursery.start_soon(describe, group_id)
        return [found[g] for g in wanted]

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        high_watermarks: bool = True,
    ) -> list[GroupOffset]:
        """The group's committed offsets (every committed partition when `partitions` is
        None), each with its partition's high watermark for the lag, sorted."""
        wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]

        async def use(coordinator: Coordinator) -> dict[TopicPartition, OffsetAndMetadata | None]:
            return await fetch_committed(coordinator, wanted, self.request_timeout_ms)

        committed = await self._with_coordinator(group_id, use)
        hws = await self.high_watermarks(committed) if high_watermarks else {}
        return [
            GroupOffset(
                tp.topic,
                tp.partition,
                None if value is None else value.offset,
                hws.get(tp),
                None if value is None else value.metadata,
                None if value is None else value.leader_epoch,
            )
            for tp, value in sorted(committed.items())
        ]

    async def high_watermarks(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[TopicPartition, int | None]:
        """Each partition's high watermark from its leader (None: no leader answered, or no
        such partition); one ListOffsets per leader, concurrently."""
        tps = sorted({TopicPartition(t, p) for t, p in partitions})
        if not tps:
            return {}
        await self.metadata.refresh({tp.topic for tp in tps})
        by_leader: dict[int, list[PartitionInfo]] = {}
        for tp in tps:
            info = self.metadata.partition_info(*tp)
            if info is not None and info.leader in self.metadata.brokers:
                by_leader.setdefault(info.leader, []).append(info)
        found: dict[tuple[str, int], int] = {}

        async def ask(broker: int, parts: list[PartitionInfo]) -> None:
            found.update(
                await self._latest_offsets(
                    broker, parts, CONSUMER_REPLICA_ID, self.request_timeout_ms
                )
            )

        async with trio.open_nursery() as nursery:
            for broker, parts in by_leader.items():
                nursery.start_soon(ask, broker, parts)
        return {tp: found.get(tp) for tp in tps}

    async def alter_group_offsets(self, group_id: str, offsets: Offsets) -> None:
        """Set the group's committed offsets (Kafka's alterConsumerGroupOffsets). Only while
        the group has no members: CommitFailedError (UNKNOWN_MEMBER_ID) otherwise."""
        committing = to_offsets(offsets)

        async def use(coordinator: Coordinator) -> None:
            await commit_offsets(
                coordinator, committing, lambda: ADMIN_MEMBER, self.request_timeout_ms
            )

        await self._with_coordinator(group_id, use)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete each group and its offsets: NONE, or NON_EMPTY_GROUP (it has members),
        GROUP_ID_NOT_FOUND, ... per group."""
        results: dict[str, ErrorCode] = {}

        async def delete(group_id: str) -> None:
            async def use(coordinator: Coordinator) -> ErrorCode:
                response: DeleteGroupsResponse = await coordinator.call(
                    lambda: DeleteGroupsRequest((group_id,)),
                    lambda r: r.results[0].error_code if r.results else 0,
                    self.request_timeout_ms,
                    "delete the group",
                )
                return ErrorCode(response.results[0].error_code)

            results[group_id] = await self._with_coordinator(group_id, use)

        wanted = list(dict.fromkeys(group_ids))
        async with trio.open_nursery() as nursery:
            for group_id in wanted:
                nursery.start_soon(delete, group_id)
        return {g: results[g] for g in wanted}

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> dict[TopicPartition, ErrorCode]:
        """Forget the group's offsets of these partitions (Kafka's deleteConsumerGroupOffsets):
        NONE, or GROUP_SUBSCRIBED_TO_TOPIC (a member subscribes to it) per partition. Raises
        for the whole group (GROUP_ID_NOT_FOUND, ...)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(set(partitions)):
            by_topic.setdefault(topic, []).append(partition)
        request = OffsetDeleteRequest(
            group_id,
            tuple(
                OffsetDeleteTopic(t, tuple(OffsetDeletePartition(p) for p in ps))
                for t, ps in by_topic.items()
            ),
        )

        async def use(coordinator: Coordinator) -> OffsetDeleteResponse:
            response: OffsetDeleteResponse = await coordinator.call(
                lambda: request,
                lambda r: r.error_code,
                self.request_timeout_ms,
                "delete offsets",
            )
            return response

        response = await self._with_coordinator(group_id, use)
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, f"delete offsets of group {group_id!r}")
        return {
            TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
            for t in response.topics
            for p in t.partitions
        }
