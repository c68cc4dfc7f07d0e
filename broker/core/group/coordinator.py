"""The group coordinator of one broker, IO-free (Kafka's GroupCoordinatorService with its
GroupMetadataManager and OffsetMetadataManager): groups and committed offsets of the
`__consumer_offsets` partitions this broker leads.

Each request becomes a `Decision`: the records to append to the group's partition and the
answer to give once they are committed (or the error if the write fails). The state changes
only by `replay`ing records, the same way a partition is loaded: it is always the replay of
the partition's log. Session and revocation deadlines are in memory only (Kafka's timers).
Past 500 lines: one handler per group API, each a few lines over the shared state; the
assignment, the member states and the records are in their own modules beside it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from broker.core.group.membership import (
    HeartbeatRefused,
    MayDescribe,
    apply_heartbeat,
    assignor_of,
    remove,
)
from broker.core.group.model import Group, GroupState, MemberState, OffsetValue, by_topic
from broker.core.group.records import (
    OFFSET_KEY,
    CoordinatorRecord,
    decode_key,
    group_record,
    group_tombstone,
    offset_record,
    offset_tombstone,
    replay,
)
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    CLASSIC_MEMBER,
    CONSUMER_MEMBER,
    DescribedGroup,
    DescribedMember,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicPartitions,
)
from protocol.messages.list_groups import ListedGroup
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
from protocol.topic_partition import OFFSETS_TOPIC, TopicPartition

__all__ = [
    "OFFSETS_TOPIC",
    "Decision",
    "GroupCoordinatorCore",
    "GroupSettings",
    "PartitionLoad",
    "java_string_hash",
    "partition_for",
]

_RETRY_MS: Final = 1000  # a failed removal's next attempt
# A group is one record of __consumer_offsets: a change that would make it larger is refused,
# so it always fits message.max.bytes (1 MiB by default).
MAX_GROUP_RECORD_BYTES: Final = 768 * 1024
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class GroupSettings:
    num_partitions: int = 50  # offsets.topic.num.partitions
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_group_size: int = 2**31 - 1  # group.consumer.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes


@dataclass(slots=True)
class Decision(Generic[R]):
    """Append `records` to `partition`, then answer `response`; `failed(code)` is the answer
    if the write fails. No records: answer at once."""

    partition: int
    response: R
    failed: Callable[[ErrorCode], R]
    records: list[CoordinatorRecord] = field(default_factory=list)


class PartitionLoad(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 arithmetic)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class GroupCoordinatorCore:
    def __init__(self, settings: GroupSettings, new_member_id: Callable[[], str]) -> None:
        self.settings = settings
        # The offsets topic's partition count: the setting until the topic exists, then its
        # actual count (`use_partition_count`).
        self.num_partitions = settings.num_partitions
        self.leader_epochs: dict[int, int] = {}  # offsets partition led -> its leader epoch
        self._new_member_id = new_member_id
        self.partitions: dict[int, PartitionLoad] = {}
        # offsets partition loading or loaded -> the id of its load (`begin_load`)
        self.load_ids: dict[int, int] = {}
        self._last_load_id = 0
        self.groups: dict[str, Group] = {}
        # Every offset appended, committed or not (what decisions see), and the committed
        # ones: below the HW of the offsets topic, what OffsetFetch answers (Kafka's pending
        # vs committed offset commits, GroupMetadataManager.onOffsetCommitAppend), each
        # with the log offset of its record.
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.committed_offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self._committed_at: dict[tuple[str, TopicPartition], int] = {}
        self.sessions: dict[tuple[str, str], int] = {}  # (group, member) -> deadline
        self.revocations: dict[tuple[str, str], int] = {}  # ... -> rebalance deadline

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def use_partition_count(self, count: int) -> None:
        """The offsets topic exists with `count` partitions: groups map over those (a change
        forgets every partition: they load again under the new mapping)."""
        if count != self.num_partitions:
            for p in list(self.partitions):
                self.unload(p)
            self.num_partitions = count

    def check(self, group_id: str) -> ErrorCode:
        """Can this coordinator serve `group_id` now?"""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        load = self.partitions.get(self.partition_of(group_id))
        if load is None:
            return ErrorCode.NOT_COORDINATOR
        if load is PartitionLoad.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    # -- loading -----------------------------------------------------------------------------

    def begin_load(self, partition: int) -> int:
        """Start loading `partition` afresh; returns the load's id, which each step of the
        load checks (`is_current_load`): a later load supersedes it, even one at the same
        leader epoch (the partition count changed meanwhile and every partition reloads)."""
        self.unload(partition)
        self.partitions[partition] = PartitionLoad.LOADING
        self._last_load_id += 1
        self.load_ids[partition] = self._last_load_id
        return self._last_load_id

    def is_current_load(self, partition: int, load_id: int) -> bool:
        return self.load_ids.get(partition) == load_id

    def replay(self, key: bytes, value: bytes | None, *, committed: bool = True) -> None:
        """Apply one record of a partition this coordinator loads (committed) or has just
        appended (not yet: `records_committed` says when). ValueError: a malformed record,
        skipped."""
        replay(self.groups, self.offsets, key, value)
        if committed and _is_offset(key):
            replay({}, self.committed_offsets, key, value)

    def records_committed(self, records: Sequence[CoordinatorRecord], base_offset: int) -> None:
        """`records`, appended at `base_offset`, are below the HW: OffsetFetch now sees
        their offsets, unless a later record for the same partition is already seen (two
        writes may finish in either order)."""
        for index, (key, value) in enumerate(records):
            kind, group_id, tp = decode_key(key)
            if kind != OFFSET_KEY or tp is None:
                continue
            at = base_offset + index
            if self._committed_at.get((group_id, tp), -1) < at:
                self._committed_at[(group_id, tp)] = at
                replay({}, self.committed_offsets, key, value)

    def finish_load(self, partition: int, now_ms: int) -> None:
        self.partitions[partition] = PartitionLoad.LOADED
        for group in self._groups_of(partition):
            for member in group.members.values():
                self._touch(group, member.member_id, now_ms)

    def load_failed(self, partition: int, load_id: int) -> None:
        """The partition's log went away or is unreadable during load `load_id`: not
        coordinating it (until leadership comes back), unless a later load superseded it."""
        if self.is_current_load(partition, load_id):
            self.leader_epochs.pop(partition, None)
            self.unload(partition)

    def unload(self, partition: int) -> None:
        """Stop coordinating the partition's groups (leadership moved): forget them."""
        self.partitions.pop(partition, None)
        self.load_ids.pop(partition, None)
        for group_id in [g for g in self.groups if self.partition_of(g) == partition]:
            del self.groups[group_id]
        for group_id in [g for g in self.offsets if self.partition_of(g) == partition]:
            del self.offsets[group_id]
        for group_id in [g for g in self.committed_offsets if self.partition_of(g) == partition]:
            del self.committed_offsets[group_id]
        for at in [k for k in self._committed_at if self.partition_of(k[0]) == partition]:
            del self._committed_at[at]
        for timers in (self.sessions, self.revocations):
            for key in [k for k in timers if self.partition_of(k[0]) == partition]:
                del timers[key]

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(
        self,
        request: ConsumerGroupHeartbeatRequest,
        topics: Mapping[str, int],
        now_ms: int,
        client_host: str = "",
        *,
        wall_ms: int,
        principal: str = "",
        may_describe: MayDescribe | None = None,
        classic: bool = False,
    ) -> Decision[ConsumerGroupHeartbeatResponse]:
        """`now_ms` (monotonic) restarts the member's session timer; `wall_ms` (the wall
        clock) goes into the records. `principal` sent it; `may_describe` filters what
        members' regexes resolve to (membership.MayDescribe); `classic`: it stands for a
        JoinGroup (broker.core.group.classic)."""
        partition = self.partition_of(request.group_id)

        def refused(code: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
            return ConsumerGroupHeartbeatResponse(code, message)

        code = self.check(request.group_id)
        if code != ErrorCode.NONE:
            return Decision(partition, refused(code), refused)
        before = self.groups.get(request.group_id, Group(request.group_id))
        try:
            update = apply_heartbeat(
                before,
                request,
                topics,
                wall_ms=wall_ms,
                client_host=client_host,
                new_member_id=self._new_member_id,
                max_group_size=self.settings.max_group_size,
                principal=principal,
                may_describe=may_describe,
                classic=classic,
            )
        except HeartbeatRefused as exc:
            return Decision(partition, refused(exc.code, str(exc)), refused)
        member = update.member
        if member is None:  # left
            # Its timers stay: if the leave is not written the member stays, and its session
            # timeout must still remove it; if it is, expire() finds it gone and drops them.
            response = ConsumerGroupHeartbeatResponse(
                ErrorCode.NONE, member_id=request.member_id, member_epoch=request.member_epoch
            )
        else:
            self._touch(update.group, member.member_id, now_ms)
            assignment = None
            if update.send_assignment:
                assignment = HeartbeatAssignment(_wire(member.assigned))
            response = ConsumerGroupHeartbeatResponse(
                ErrorCode.NONE,
                member_id=member.member_id,
                member_epoch=request.member_epoch if member.left_static else member.member_epoch,
                heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
                assignment=assignment,
            )
        records = [group_record(update.group)] if update.group != before else []
        if records and len(records[0][1] or b"") > MAX_GROUP_RECORD_BYTES:
            message = f"the group's state would exceed {MAX_GROUP_RECORD_BYTES} bytes"
            return Decision(partition, refused(ErrorCode.GROUP_MAX_SIZE_REACHED, message), refused)
        return Decision(partition, response, refused, records)

    # -- offsets -----------------------------------------------------------------------------

    def commit(
        self, request: OffsetCommitRequest, topics: Mapping[str, int], wall_ms: int
    ) -> Decision[OffsetCommitResponse]:
        """`wall_ms` (the wall clock) is the commit's timestamp (offsets retention)."""
        partition = self.partition_of(request.group_id)

        def every(code: ErrorCode) -> OffsetCommitResponse:
            return _commit_response(request, lambda t, p: code)

        code = self.check(request.group_id)
        if code == ErrorCode.NONE:
            code = self._check_committer(request)
        if code != ErrorCode.NONE:
            return Decision(partition, every(code), every)
        errors: dict[TopicPartition, ErrorCode] = {}
        records = []
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                error = self._check_commit(tp, p.committed_offset, p.committed_metadata, topics)
                errors[tp] = error
                if error == ErrorCode.NONE:
                    value = OffsetValue(
                        p.committed_offset, p.committed_leader_epoch, p.committed_metadata, wall_ms
                    )
                    records.append(offset_record(request.group_id, tp, value))
        response = _commit_response(request, lambda t, p: errors[TopicPartition(t, p)])

        def failed(code: ErrorCode) -> OffsetCommitResponse:
            return _commit_response(
                request,
                lambda t, p: (
                    code
                    if errors[TopicPartition(t, p)] == ErrorCode.NONE
                    else errors[TopicPartition(t, p)]
                ),
            )

        return Decision(partition, response, failed, records)

    def fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        code = self.check(request.group_id)
        if code == ErrorCode.NONE and request.member_id:
            group = self.groups.get(request.group_id)
            member = group.members.get(request.member_id) if group else None
            if member is None:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            elif request.member_epoch != member.member_epoch:
                code = ErrorCode.STALE_MEMBER_EPOCH
        if code != ErrorCode.NONE:
            return OffsetFetchResponse((), code)
        committed = self.committed_offsets.get(request.group_id, {})
        if request.topics is None:
            wanted = sorted(committed)
        else:
            wanted = [
                TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes
            ]
        by_name: dict[str, list[OffsetFetchPartition]] = {}
        for tp in wanted:
            value = committed.get(tp)
            by_name.setdefault(tp.topic, []).append(
                OffsetFetchPartition(tp.partition, -1)
                if value is None
                else OffsetFetchPartition(
                    tp.partition, value.offset, 0, value.leader_epoch, value.metadata
                )
            )
        return OffsetFetchResponse(
            tuple(OffsetFetchTopic(t, tuple(ps)) for t, ps in by_name.items())
        )

    def delete_offsets(self, request: OffsetDeleteRequest) -> Decision[OffsetDeleteResponse]:
        partition = self.partition_of(request.group_id)

        def refused(code: ErrorCode) -> OffsetDeleteResponse:
            return OffsetDeleteResponse(code)

        code = self.check(request.group_id)
        group = self.groups.get(request.group_id)
        committed = self.offsets.get(request.group_id, {})
        if code == ErrorCode.NONE and group is None and not committed:
            code = ErrorCode.GROUP_ID_NOT_FOUND
        if code != ErrorCode.NONE:
            return Decision(partition, refused(code), refused)
        subscribed = group.subscribed_topics() if group is not None and group.members else set()
        records = []
        topics = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if topic.name in subscribed:
                    results.append(
                        OffsetDeletePartitionResponse(
                            p.partition_index, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                        )
                    )
                    continue
                if tp in committed:
                    records.append(offset_tombstone(request.group_id, tp))
                results.append(OffsetDeletePartitionResponse(p.partition_index, ErrorCode.NONE))
            topics.append(OffsetDeleteTopicResponse(topic.name, tuple(results)))
        return Decision(
            partition, OffsetDeleteResponse(ErrorCode.NONE, tuple(topics)), refused, records
        )

    # -- groups ------------------------------------------------------------------------------

    def delete_group(self, group_id: str) -> Decision[ErrorCode]:
        partition = self.partition_of(group_id)
        code = self.check(group_id)
        group = self.groups.get(group_id)
        committed = self.offsets.get(group_id, {})
        if code == ErrorCode.NONE:
            if group is not None and group.members:
                code = ErrorCode.NON_EMPTY_GROUP
            elif group is None and not committed:
                code = ErrorCode.GROUP_ID_NOT_FOUND
        if code != ErrorCode.NONE:
            return Decision(partition, code, lambda c: c)
        records = [offset_tombstone(group_id, tp) for tp in sorted(committed)]
        if group is not None:
            records.append(group_tombstone(group_id))
        return Decision(partition, ErrorCode.NONE, lambda c: c, records)

    def describe(self, group_id: str) -> DescribedGroup:
        code = self.check(group_id)
        if code != ErrorCode.NONE:
            return DescribedGroup(group_id, code)
        group = self.groups.get(group_id)
        if group is None or (group.classic and not group.members):
            # No epochs: a group of committed offsets only, or an emptied classic group (Kafka
            # 4.0 holds both as classic groups; the Kafka listener answers them so).
            if group is not None or group_id in self.offsets:
                return DescribedGroup(group_id, ErrorCode.NONE, None, GroupState.EMPTY.value)
            return DescribedGroup(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, "no such group", GroupState.DEAD.value
            )
        members = tuple(
            DescribedMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_wire(m.assigned),
                target_assignment=_wire(group.target.get(m.member_id, frozenset())),
                member_type=CLASSIC_MEMBER if m.classic else CONSUMER_MEMBER,
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        )
        return DescribedGroup(
            group_id,
            ErrorCode.NONE,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=assignor_of(group),
            members=members,
        )

    def list_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        wanted = {s.lower() for s in states}
        out = []
        for group_id in sorted(self.groups.keys() | self.offsets.keys()):
            if self.check(group_id) != ErrorCode.NONE:
                continue
            group = self.groups.get(group_id)
            state = group.state.value if group is not None else GroupState.EMPTY.value
            if not wanted or state.lower() in wanted:
                out.append(ListedGroup(group_id, group_state=state))
        return out

    # -- timers ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [*self.sessions.values(), *self.revocations.values()]
        return min(deadlines) if deadlines else None

    def expire(self, now_ms: int, *, wall_ms: int, offsets: bool = True) -> list[Decision[None]]:
        """Members past their session or revocation deadline are removed (Kafka fences them);
        with `offsets`, those of groups empty for offsets.retention.minutes go too. A removal
        whose write fails is tried again a second later (the deadline moves, the member
        stays). Deadlines are on the monotonic clock (`now_ms`), retention on the wall clock
        (`wall_ms`), as the times it compares with are stored in records."""
        decisions: list[Decision[None]] = []
        due = {k for k, d in self.sessions.items() if d <= now_ms}
        due |= {k for k, d in self.revocations.items() if d <= now_ms}
        for group_id, member_id in sorted(due):
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                self._forget_member(group_id, member_id)
                continue
            for timers in (self.sessions, self.revocations):
                if (group_id, member_id) in timers:
                    timers[(group_id, member_id)] = now_ms + _RETRY_MS
            after = remove(group, member_id, wall_ms)
            decisions.append(self._write(group_id, [group_record(after)]))
        if not offsets:  # offsets.retention.check.interval.ms has not come round yet
            return decisions
        retention_ms = self.settings.offsets_retention_ms
        for group_id in sorted(self.groups.keys() | self.offsets.keys()):
            if self.check(group_id) != ErrorCode.NONE:
                continue
            group = self.groups.get(group_id)
            committed = self.offsets.get(group_id, {})
            if group is not None:
                if group.members or group.empty_since_ms < 0:
                    continue
                if wall_ms - group.empty_since_ms < retention_ms:
                    continue
                records = [offset_tombstone(group_id, tp) for tp in sorted(committed)]
                decisions.append(self._write(group_id, [*records, group_tombstone(group_id)]))
            else:  # offsets committed by an admin or a consumer outside any group
                old = [
                    tp
                    for tp, v in sorted(committed.items())
                    if wall_ms - v.commit_ms >= retention_ms
                ]
                if old:
                    decisions.append(
                        self._write(group_id, [offset_tombstone(group_id, tp) for tp in old])
                    )
        return decisions

    # -- helpers -----------------------------------------------------------------------------

    def _write(self, group_id: str, records: list[CoordinatorRecord]) -> Decision[None]:
        return Decision(self.partition_of(group_id), None, lambda code: None, records)

    def _touch(self, group: Group, member_id: str, now_ms: int) -> None:
        """A member was heard from: a new session deadline; a revocation deadline from when
        it started revoking (Kafka's rebalance timeout)."""
        key = (group.group_id, member_id)
        member = group.members[member_id]
        self.sessions[key] = now_ms + self.settings.session_timeout_ms
        if member.state != MemberState.UNREVOKED_PARTITIONS:
            self.revocations.pop(key, None)
        elif key not in self.revocations:
            self.revocations[key] = now_ms + member.rebalance_timeout_ms

    def _forget_member(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        self.revocations.pop((group_id, member_id), None)

    def _groups_of(self, partition: int) -> list[Group]:
        return [g for g in self.groups.values() if self.partition_of(g.group_id) == partition]

    def _check_committer(self, request: OffsetCommitRequest) -> ErrorCode:
        group = self.groups.get(request.group_id)
        if request.member_epoch < 0 and not request.member_id:  # an admin, or no group
            if group is not None and group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.NONE
        member = group.members.get(request.member_id) if group is not None else None
        if member is None or member.left_static:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def _check_commit(
        self, tp: TopicPartition, offset: int, metadata: str | None, topics: Mapping[str, int]
    ) -> ErrorCode:
        if not 0 <= tp.partition < topics.get(tp.topic, 0):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if offset < 0:
            return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
        if (
            metadata is not None
            and len(metadata.encode()) > self.settings.offset_metadata_max_bytes
        ):
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        return ErrorCode.NONE


def _wire(partitions: Iterable[TopicPartition]) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in by_topic(partitions).items())


def _commit_response(
    request: OffsetCommitRequest, code_of: Callable[[str, int], ErrorCode]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        tuple(
            OffsetCommitTopicResponse(
                t.name,
                tuple(
                    OffsetCommitPartitionResponse(
                        p.partition_index, code_of(t.name, p.partition_index)
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )


def _is_offset(key: bytes) -> bool:
    return decode_key(key)[0] == OFFSET_KEY
