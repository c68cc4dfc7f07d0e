"""Delayed operations: a request that waits for its partitions, as an object (Kafka's
DelayedOperation, DelayedProduce, DelayedFetch).

A shell parks one under its `watch_keys` (broker/purgatory.py in trio, SimPurgatory in the
simulator) and calls `try_complete(state, now_ms)` when one of them is woken, or `expire(now_ms)`
once its deadline passed and a last `try_complete` did not finish it; `response()` is then the
answer. That last try is told `woken=False` when none of its keys was woken since the try
before it. What a try did that other requests must see (a HW moved, a follower may join the ISR)
is its `Actions` (broker.core.actions), which the shell applies after every try: the objects
decide, the shells only wake, write and time.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, TypeVar

from broker.core.actions import NO_ACTIONS, Actions
from broker.core.fetch import FetchRead, fetch_keys, read_fetch
from broker.core.produce import ProduceAppend, check_waiting, produce_response, time_out
from broker.core.state import BrokerState
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.topic_partition import TopicPartition

__all__ = ["DelayedFetch", "DelayedOperation", "DelayedProduce"]

R_co = TypeVar("R_co", covariant=True)


class DelayedOperation(Protocol[R_co]):
    @property
    def watch_keys(self) -> Sequence[Hashable]: ...

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        """Settle what can be settled now; True once the answer is final. `woken` is False
        only for the last try at the deadline when no key was woken since the previous try."""
        ...

    def expire(self, now_ms: int) -> None:
        """The deadline passed and the last try did not complete: make the answer final."""
        ...

    def take_actions(self) -> Actions:
        """What the last steps asked the shell to do (each asked once)."""
        ...

    def response(self) -> R_co: ...


class DelayedProduce:
    """An acks=all produce waiting until every appended partition's HW covers its batch
    (broker.core.produce.check_waiting: or it errors, or leadership moved); on expiry the
    unfinished ones are REQUEST_TIMED_OUT (Kafka's DelayedProduce.onExpiration). acks=1
    completes at the first try. `acked`: the partitions the last try acknowledged."""

    __slots__ = ("_actions", "acked", "append", "request")

    def __init__(self, request: ProduceRequest, append: ProduceAppend) -> None:
        self.request = request
        self.append = append
        self.acked: list[TopicPartition] = []
        self._actions = Actions(append.wake) if append.wake else NO_ACTIONS

    @property
    def watch_keys(self) -> list[TopicPartition]:
        return list(self.append.waiting)

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        self.acked = check_waiting(state, self.append) if self.append.waiting else []
        return not self.append.waiting

    def expire(self, now_ms: int) -> None:
        time_out(self.append)

    def take_actions(self) -> Actions:
        actions, self._actions = self._actions, NO_ACTIONS
        return actions

    def response(self) -> ProduceResponse:
        return produce_response(self.request, self.append)


class DelayedFetch:
    """A fetch long-polling until `min_bytes` can be answered or a partition has an error to
    report (a leadership change shows as one); each try reads again, so a follower's fetch
    moves the HW and the ISR there (its `Actions`). On expiry the last read is the answer
    (Kafka's DelayedFetch.onComplete reads what there is), unless nothing changed since the
    last read (`try_complete`)."""

    __slots__ = ("_actions", "denied", "read", "request", "watch_keys")

    def __init__(self, request: FetchRequest, denied: frozenset[str] = frozenset()) -> None:
        self.request = request
        self.denied = denied
        self.watch_keys = fetch_keys(request)
        self.read: FetchRead | None = None
        self._actions = NO_ACTIONS

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        last = self.read
        if not woken and last is not None and not last.wake and not last.isr_writes:
            # The deadline passed and no key was woken since the last read: nothing that
            # answer says changed (appends, HW moves, leadership, ISR writes, a partition
            # going offline all wake its keys), and that read moved nothing itself, so it is
            # the answer (an idle follower's session is not walked twice per long poll). Not
            # read again: the follower's caught-up time stays the last read's, at most
            # max_wait_ms old, and replica.fetch.wait.max.ms <= replica.lag.time.max.ms
            # (KafkaConfig's rule, broker_config). Kafka's completion read never updates it.
            # A log start moved by retention meanwhile (no wake) is told by the next fetch.
            return False
        read = self.read = read_fetch(state, self.request, now_ms, self.denied)
        if read.wake or read.isr_writes:
            self._actions = Actions(read.wake, read.isr_writes)
        return read.satisfied(self.request.min_bytes)

    def expire(self, now_ms: int) -> None:
        pass  # the last try's read is the answer

    def take_actions(self) -> Actions:
        actions, self._actions = self._actions, NO_ACTIONS
        return actions

    def response(self) -> FetchResponse:
        assert self.read is not None, "answered before its first try"
        return self.read.response
