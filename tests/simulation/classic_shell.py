"""Classic group requests in the simulation (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), as
broker/handlers/classic_groups.py serves them on the Kafka listener: the same core functions
(broker.core.group.classic) in the same order, on the simulated coordinator shell. The
requests are plain dataclasses: the subscription and assignment bytes of Kafka's consumer
protocol are not what is under test here."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.core.group.classic import (
    ClassicJoin,
    Synced,
    classic_heartbeat_answer,
    classic_member,
    forget_synced,
    heartbeat_error,
    join_heartbeat,
    join_refusal,
    keep_alive_heartbeat,
    leave_heartbeat,
    sync_group,
)
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tests.simulation.group_shell import SimGroupCoordinator

__all__ = [
    "CLASSIC_REQUESTS",
    "ClassicAnswer",
    "SimHeartbeat",
    "SimJoinGroup",
    "SimLeaveGroup",
    "SimSyncGroup",
    "serve_classic",
]


@dataclass(frozen=True)
class SimJoinGroup:
    group_id: str
    member_id: str
    protocol_names: tuple[str, ...]  # "cooperative-sticky" or "range" (eager)
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...]
    rebalance_timeout_ms: int


@dataclass(frozen=True)
class SimSyncGroup:
    group_id: str
    member_id: str
    generation_id: int


@dataclass(frozen=True)
class SimHeartbeat:
    group_id: str
    member_id: str
    generation_id: int


@dataclass(frozen=True)
class SimLeaveGroup:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ClassicAnswer:
    error_code: int
    member_id: str = ""
    generation_id: int = -1
    assignment: frozenset[TopicPartition] = frozenset()


CLASSIC_REQUESTS = (SimJoinGroup, SimSyncGroup, SimHeartbeat, SimLeaveGroup)

# Each coordinator shell's SyncGroup memory (GroupCoordinator.classic_synced): a restarted
# broker has a new shell, and so forgets it, as a real one does.
_SYNCED: weakref.WeakKeyDictionary[Any, Synced] = weakref.WeakKeyDictionary()


def serve_classic(
    groups: SimGroupCoordinator,
    request: object,
    now_ms: int,
    wall_ms: int,
    respond: Callable[[ClassicAnswer], None],
) -> None:
    core = groups.core
    synced = _SYNCED.setdefault(groups, {})
    group_id = getattr(request, "group_id", "")
    code = core.check(group_id)
    if code != ErrorCode.NONE:
        return respond(ClassicAnswer(code))

    def member(member_id: str) -> Any:
        return classic_member(core.groups.get(group_id), member_id)

    def heartbeat(hb: Any, then: Callable[[Any], None], *, classic: bool = False) -> None:
        decision = core.heartbeat(
            hb, groups.topics(), now_ms, "sim", wall_ms=wall_ms, classic=classic
        )
        groups.write(decision, then)

    if isinstance(request, SimJoinGroup):
        known = member(request.member_id)
        refusal = join_refusal(known, request.member_id, None)
        if refusal != ErrorCode.NONE:
            return respond(ClassicAnswer(refusal))
        join = ClassicJoin(
            group_id=group_id,
            member_id="" if known is None else known.member_id,
            instance_id=None,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_names=request.protocol_names,
            topics=request.topics,
            owned=request.owned,
            client_id="sim-classic",
        )

        def joined(response: Any) -> None:
            if response.error_code != ErrorCode.NONE:
                return respond(ClassicAnswer(heartbeat_error(response.error_code)))
            now = member(response.member_id)
            if now is None:
                return respond(ClassicAnswer(ErrorCode.UNKNOWN_MEMBER_ID))
            forget_synced(synced, group_id, now.member_id)
            respond(ClassicAnswer(ErrorCode.NONE, now.member_id, now.member_epoch))

        return heartbeat(join_heartbeat(join, known), joined, classic=True)
    if isinstance(request, SimSyncGroup):
        code, assignment = sync_group(
            synced, group_id, member(request.member_id), request.generation_id
        )
        return respond(ClassicAnswer(code, request.member_id, request.generation_id, assignment))
    if isinstance(request, SimHeartbeat):
        known = member(request.member_id)
        if known is None:
            return respond(ClassicAnswer(ErrorCode.UNKNOWN_MEMBER_ID))

        def alive(response: Any) -> None:
            if response.error_code != ErrorCode.NONE:
                return respond(ClassicAnswer(heartbeat_error(response.error_code)))
            answer = classic_heartbeat_answer(
                synced, group_id, member(request.member_id), request.generation_id
            )
            respond(ClassicAnswer(answer))

        return heartbeat(keep_alive_heartbeat(group_id, known), alive)
    if isinstance(request, SimLeaveGroup):
        known = member(request.member_id)
        if known is None:
            return respond(ClassicAnswer(ErrorCode.UNKNOWN_MEMBER_ID))

        def left(response: Any) -> None:
            forget_synced(synced, group_id, known.member_id)
            respond(ClassicAnswer(heartbeat_error(response.error_code)))

        return heartbeat(leave_heartbeat(group_id, known), left)
    raise TypeError(f"not a classic request: {request!r}")
