"""A group member's decisions (Kafka's ConsumerMembershipManager and HeartbeatState, KIP-848),
IO-free: what the next ConsumerGroupHeartbeat says and when it goes, what an answer changes,
and which partitions to let go of or take on. Time comes in as `now_ms`; the trio shell
(group.py) sends, and poll() runs the reconciliation this core asks for. docs/groups.md is
the contract with the coordinator.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from client.settings import MAX_POLL_INTERVAL_MS, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.topic_partition import TopicPartition

__all__ = [
    "COORDINATOR_ERRORS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "FATAL_ERRORS",
    "MemberState",
    "Membership",
    "Outcome",
    "Reconciliation",
    "by_topic",
    "reconcile",
]

# The coordinator's group.consumer.session.timeout.ms default: a member that heard nothing
# from its coordinator for this long has been removed by now; its partitions are lost.
DEFAULT_SESSION_TIMEOUT_MS: Final = 45_000
# group.consumer.heartbeat.interval.ms's default, for an answer that names no interval.
DEFAULT_HEARTBEAT_INTERVAL_MS: Final = 5_000
COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
FENCED_ERRORS: Final = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
FATAL_ERRORS: Final = frozenset(
    {
        ErrorCode.UNRELEASED_INSTANCE_ID,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.INVALID_GROUP_ID,
    }
)

Partitions = frozenset[TopicPartition]


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"  # not in the group (never subscribed, or left)
    JOINING = "joining"  # the join heartbeat (epoch 0) is to be sent or is out
    STABLE = "stable"  # owns what the coordinator last gave it
    RECONCILING = "reconciling"  # a new assignment waits for poll() to take it on
    FENCED = "fenced"  # its partitions are lost: the lost listener, then a rejoin
    LEAVING = "leaving"  # the leave heartbeat (epoch -1 or -2) is to be sent or is out
    STALE = "stale"  # left because poll() was not called for max_poll_interval_ms
    FATAL = "fatal"  # an error no retry fixes: poll() raises it


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What taking on an assignment means for a member owning `owned`."""

    revoke: Partitions  # owned, not in the assignment: stop, commit, revoked listener
    assign: Partitions  # in the assignment, not owned: committed offsets, assigned listener
    target: Partitions  # what the member owns once done


def reconcile(owned: Partitions, assignment: Partitions | None) -> Reconciliation | None:
    """docs/groups.md: None (an answer without assignment) keeps what is owned; otherwise the
    assignment is the complete set to own. None when there is nothing to change."""
    if assignment is None or assignment == owned:
        return None
    return Reconciliation(owned - assignment, assignment - owned, assignment)


def by_topic(partitions: Iterable[TopicPartition]) -> tuple[TopicPartitions, ...]:
    """The wire form of a set of partitions: per topic (sorted), its sorted partitions."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(grouped.items()))


def _partitions(topics: Iterable[TopicPartitions]) -> Partitions:
    return frozenset(TopicPartition(t.topic, p) for t in topics for p in t.partitions)


@dataclass(frozen=True, slots=True)
class _Fields:
    """The optional heartbeat fields, as last acknowledged by the coordinator."""

    topics: tuple[str, ...] | None
    regex: str | None
    assignor: str | None
    owned: Partitions


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the shell does after a heartbeat's answer (or its failure)."""

    find_coordinator: bool = False  # the coordinator moved or is unknown: look it up again
    stop_fetching: Partitions = frozenset()  # being revoked or lost: no fetch, no records
    wake_poll: bool = False  # poll() has work: a reconciliation, lost partitions, an error


class Membership:
    def __init__(
        self,
        group_id: str,
        *,
        instance_id: str | None = None,
        client_id: str = "",
        rebalance_timeout_ms: int = MAX_POLL_INTERVAL_MS,
        server_assignor: str | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS,
    ) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.session_timeout_ms = session_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_ms, retry_backoff_max_ms)

        self.state = MemberState.UNSUBSCRIBED
        self.member_id = ""
        self.member_epoch = JOIN_EPOCH
        self.topics: tuple[str, ...] | None = None
        self.regex: str | None = None
        self.owned: Partitions = frozenset()
        self.target: Partitions | None = None  # the latest assignment not taken on yet
        self.heartbeat_interval_ms = 0
        self.fatal_error: tuple[int, str | None] | None = None  # (code, broker's message)
        self.in_flight = False
        self._acked: _Fields | None = None  # None: send every field
        self._sending: _Fields | None = None
        self._sending_leave = False
        self._leave_epoch = LEAVE_EPOCH
        self._stale_after_leave = False
        self._urgent = False
        self._next_heartbeat_ms = 0.0
        self._last_answer_ms: float | None = None
        self._failures = 0

    # ----- what the application does ---------------------------------------------------------

    @property
    def in_group(self) -> bool:
        """Joined or joining: heartbeats go out."""
        return self.state in (MemberState.JOINING, MemberState.STABLE, MemberState.RECONCILING)

    def subscribe(
        self, topics: Iterable[str] | None = None, regex: str | None = None, now_ms: float = 0
    ) -> None:
        """Subscribe to these topics, or to the topics matching `regex` (the coordinator
        resolves it). Joins the group unless already in it; a member sends the change at once."""
        if (topics is None) == (regex is None):
            raise ValueError("subscribe to topics or to a regex (one of them)")
        self.topics = None if topics is None else tuple(sorted(set(topics)))
        self.regex = regex
        if self.state is MemberState.UNSUBSCRIBED:
            self._join(now_ms)
        elif self.state is MemberState.LEAVING:
            self._stale_after_leave = False  # the leave goes first; then a rejoin
        elif self.in_group:
            self._urgent = True  # the new subscription goes out at once
            self._next_heartbeat_ms = now_ms

    def leave(self, now_ms: float, *, poll_expired: bool = False) -> None:
        """Leave the group: epoch -2 for a static member (its assignment waits for it), -1
        otherwise and always when poll() was not called for max_poll_interval_ms (then the
        member is STALE until the next poll). Nothing to send if it never got a member id."""
        if not self.in_group:
            return
        self._leave_epoch = (
            STATIC_LEAVE_EPOCH if self.instance_id is not None and not poll_expired else LEAVE_EPOCH
        )
        self._stale_after_leave = poll_expired
        if not self.member_id and not self.in_flight:
            self._left(now_ms)
            return
        self.state = MemberState.LEAVING
        self._urgent = True
        self._next_heartbeat_ms = now_ms

    def unsubscribe(self, now_ms: float) -> None:
        """Leave (epoch -1 or -2) and stay out: no rejoin once the leave is answered."""
        self.topics = None
        self.regex = None
        self.leave(now_ms)

    # ----- reconciliation (run by poll) -----------------------------------------------------------

    def reconciliation(self) -> Reconciliation | None:
        if self.state is not MemberState.RECONCILING:
            return None
        return reconcile(self.owned, self.target)

    def reconciled(self, owned: Partitions, now_ms: float) -> None:
        """poll() took on a reconciliation: the member owns `owned` now; tell the coordinator
        at once (docs/groups.md: heartbeat with the new topic_partitions)."""
        self.owned = owned
        if self.state is not MemberState.RECONCILING:
            return  # fenced or left meanwhile: the owned set is reported on rejoin, if ever
        if self.target is None or self.target == owned:
            self.target = None
            self.state = MemberState.STABLE
        self._urgent = True
        self._next_heartbeat_ms = now_ms

    def stop_fetching(self) -> Partitions:
        """Owned partitions not to fetch or return now: being revoked, or lost."""
        if self.state in (MemberState.FENCED, MemberState.STALE, MemberState.FATAL):
            return self.owned
        if self.state is MemberState.RECONCILING and self.target is not None:
            return self.owned - self.target
        return frozenset()

    @property
    def partitions_lost(self) -> bool:
        """poll() must drop every owned partition (lost listener) before rejoining."""
        return self.state in (MemberState.FENCED, MemberState.STALE)

    def lost_handled(self, now_ms: float) -> None:
        """The lost listener ran: own nothing, then rejoin (a new member id, epoch 0) if
        still subscribed."""
        if not self.partitions_lost:
            return
        self.owned = frozenset()
        self.target = None
        if self.topics is None and self.regex is None:
            self._reset_identity()
            self.state = MemberState.UNSUBSCRIBED
            return
        self._join(now_ms)

    # ----- heartbeats -----------------------------------------------------------------------

    def heartbeat_due(self, now_ms: float) -> bool:
        return not self.in_flight and now_ms >= self.next_heartbeat_ms()

    def next_heartbeat_ms(self) -> float:
        """When the next heartbeat goes (inf: none to send now)."""
        if self.in_flight or self.state not in (
            MemberState.JOINING,
            MemberState.STABLE,
            MemberState.RECONCILING,
            MemberState.LEAVING,
        ):
            return math.inf
        if self.state is MemberState.LEAVING and not self.member_id:
            return math.inf  # the join's answer brings the member id the leave needs
        return self._next_heartbeat_ms

    def session_lost(self, now_ms: float) -> bool:
        """No answer for the session timeout: the coordinator has removed this member, so its
        partitions are someone else's by now (docs/groups.md). Moves to FENCED."""
        if self.state not in (MemberState.STABLE, MemberState.RECONCILING):
            return False
        if self._last_answer_ms is None or now_ms - self._last_answer_ms < self.session_timeout_ms:
            return False
        self.state = MemberState.FENCED
        return True

    def build_heartbeat(self, now_ms: float) -> ConsumerGroupHeartbeatRequest:
        assert not self.in_flight and self.next_heartbeat_ms() < math.inf
        self.in_flight = True
        self._urgent = False
        if self.state is MemberState.LEAVING:
            self._sending_leave = True
            self._sending = None
            return ConsumerGroupHeartbeatRequest(
                self.group_id,
                self.member_id,
                self._leave_epoch,
                instance_id=self.instance_id,
                client_id=self.client_id,
            )
        self._sending_leave = False
        fields = _Fields(self.topics, self.regex, self.server_assignor, self.owned)
        self._sending = fields
        acked = None if self.state is MemberState.JOINING else self._acked
        topics, regex = _subscription_fields(fields, acked)
        if acked is None:  # joining, or after a failure: every field
            return ConsumerGroupHeartbeatRequest(
                self.group_id,
                self.member_id,
                self.member_epoch,
                instance_id=self.instance_id,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                subscribed_topic_names=topics,
                subscribed_topic_regex=regex,
                server_assignor=fields.assignor,
                topic_partitions=by_topic(fields.owned),
                client_id=self.client_id,
            )
        return ConsumerGroupHeartbeatRequest(
            self.group_id,
            self.member_id,
            self.member_epoch,
            instance_id=self.instance_id,
            subscribed_topic_names=topics,
            subscribed_topic_regex=regex,
            server_assignor=fields.assignor if acked.assignor != fields.assignor else None,
            topic_partitions=by_topic(fields.owned) if acked.owned != fields.owned else None,
            client_id=self.client_id,
        )

    def on_response(self, response: ConsumerGroupHeartbeatResponse, now_ms: float) -> Outcome:
        self.in_flight = False
        sent_leave = self._sending_leave
        sending, self._sending = self._sending, None
        code = response.error_code
        if code == ErrorCode.NONE:
            return self._on_success(response, sending, sent_leave, now_ms)
        if code in COORDINATOR_ERRORS or code == ErrorCode.REQUEST_TIMED_OUT:
            return self._retry_later(now_ms, find_coordinator=code != ErrorCode.REQUEST_TIMED_OUT)
        if code in FENCED_ERRORS:
            if sent_leave or self.state is MemberState.LEAVING:
                self._left(now_ms)
                return Outcome(wake_poll=True)
            if self.state in (MemberState.STABLE, MemberState.RECONCILING, MemberState.JOINING):
                self.state = MemberState.FENCED
                return Outcome(stop_fetching=self.owned, wake_poll=True)
            return Outcome()
        self.fatal_error = (code, response.error_message)
        self.state = MemberState.FATAL
        return Outcome(stop_fetching=self.owned, wake_poll=True)

    def on_failure(self, now_ms: float) -> Outcome:
        """The heartbeat got no answer (connection lost, timed out, no coordinator found)."""
        self.in_flight = False
        self._sending = None
        return self._retry_later(now_ms, find_coordinator=True)

    # ----- internals ---------------------------------------------------------------------------

    def _on_success(
        self,
        response: ConsumerGroupHeartbeatResponse,
        sending: _Fields | None,
        sent_leave: bool,
        now_ms: float,
    ) -> Outcome:
        self._failures = 0
        self._last_answer_ms = now_ms
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        elif self.heartbeat_interval_ms <= 0:
            self.heartbeat_interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        if sent_leave:
            self._left(now_ms)
            return Outcome(wake_poll=True)
        if not self.in_group and self.state is not MemberState.LEAVING:
            return Outcome()  # a late answer: fenced, stale or fatal meanwhile
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        self._acked = sending
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        if self._urgent:
            self._next_heartbeat_ms = now_ms
        if self.state is MemberState.LEAVING:
            return Outcome()  # the leave goes next, with the member id just learned
        if response.assignment is not None:
            self.target = _partitions(response.assignment.topic_partitions)
        if self.target is None or self.target == self.owned:
            self.target = None
            self.state = MemberState.STABLE
            return Outcome()
        self.state = MemberState.RECONCILING
        return Outcome(stop_fetching=self.owned - self.target, wake_poll=True)

    def _retry_later(self, now_ms: float, *, find_coordinator: bool) -> Outcome:
        if self.state is MemberState.LEAVING and not self.member_id:
            self._left(now_ms)  # the join never got through: there is no member to remove
            return Outcome(find_coordinator=find_coordinator, wake_poll=True)
        self._failures += 1
        self._acked = None  # the next heartbeat carries every field again
        backoff = min(
            self.retry_backoff_max_ms, self.retry_backoff_ms * (1 << min(self._failures - 1, 16))
        )
        self._next_heartbeat_ms = now_ms + backoff
        return Outcome(find_coordinator=find_coordinator)

    def _join(self, now_ms: float) -> None:
        self._reset_identity()
        self.state = MemberState.JOINING
        self._urgent = True
        self._next_heartbeat_ms = now_ms

    def _reset_identity(self) -> None:
        self.member_id = ""
        self.member_epoch = JOIN_EPOCH
        self._acked = None
        self._last_answer_ms = None

    def _left(self, now_ms: float) -> None:
        """The leave is done (answered, or the member was gone anyway)."""
        stale = self._stale_after_leave
        self._stale_after_leave = False
        self._reset_identity()
        self.target = None
        if stale:
            self.state = MemberState.STALE  # poll() drops the partitions, then rejoins
            return
        self.owned = frozenset()
        self.state = MemberState.UNSUBSCRIBED
        if self.topics is not None or self.regex is not None:
            self._join(now_ms)  # subscribed again while the leave was on its way


def _subscription_fields(
    fields: _Fields, acked: _Fields | None
) -> tuple[tuple[str, ...] | None, str | None]:
    """(subscribed_topic_names, subscribed_topic_regex) to send: None for an unchanged one;
    a switch between names and a regex clears the other (names (), regex "")."""
    if acked is not None and (acked.topics, acked.regex) == (fields.topics, fields.regex):
        return None, None
    if fields.regex is not None:
        return (() if acked is not None and acked.topics else None), fields.regex
    return fields.topics or (), ("" if acked is not None and acked.regex is not None else None)
