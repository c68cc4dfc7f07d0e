"""The group coordinator's write, once for both shells (Kafka's CoordinatorRuntime): a
decision's records are appended to its `__consumer_offsets` partition (acks=all, the broker's
own write), replayed into the core as uncommitted, and the decision is answered once the HW
covers them (then they are committed in the core) or with its failure answer.

`start_write` appends and replays now; the `DelayedWrite` it returns is a delayed operation
(broker.core.delayed) that the shell parks as any acks=all produce. A partition replayed on
becoming its leader is served once its HW covers what was replayed: a `DelayedLoad`.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from broker.core.actions import NO_ACTIONS, Actions
from broker.core.delayed import DelayedProduce
from broker.core.group.coordinator import Decision, GroupCoordinatorCore, PartitionLoad
from broker.core.group.writes import coordinator_batches, write_error
from broker.core.partition import Partition
from broker.core.produce import append_produce
from broker.core.state import BrokerState
from protocol.errors import ErrorCode
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.topic_partition import OFFSETS_TOPIC, TopicPartition

__all__ = ["DelayedLoad", "DelayedWrite", "start_write"]

R = TypeVar("R")


class DelayedWrite(Generic[R]):
    """A decision's write waiting for the HW. `produce` is None when it was answered at once
    (no records, not coordinating, the append failed); else `produce.acked` says when the
    records were acknowledged, `batches` and `tp` what was appended where."""

    __slots__ = ("_answer", "_answered", "_core", "_decision", "batches", "produce", "tp")

    def __init__(
        self,
        core: GroupCoordinatorCore,
        decision: Decision[R],
        *answer: R,
        produce: DelayedProduce | None = None,
        batches: bytes = b"",
    ) -> None:
        self._core = core
        self._decision = decision
        # R may be None (a timer's decision): whether it is answered is its own flag.
        self._answered = bool(answer)
        self._answer = answer[0] if answer else decision.response
        self.produce = produce
        self.batches = batches
        self.tp = TopicPartition(OFFSETS_TOPIC, decision.partition)

    @property
    def watch_keys(self) -> list[TopicPartition]:
        return [] if self.produce is None else self.produce.watch_keys

    @property
    def timeout_ms(self) -> int:
        return 0 if self.produce is None else self.produce.request.timeout_ms

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        if self.produce is None:
            return True
        if not self.produce.try_complete(state, now_ms, woken):
            return False
        self._finish()
        return True

    def expire(self, now_ms: int) -> None:
        if self.produce is not None:
            self.produce.expire(now_ms)
            self._finish()

    def take_actions(self) -> Actions:
        return NO_ACTIONS if self.produce is None else self.produce.take_actions()

    def response(self) -> R:
        assert self._answered, "answered before it completed"
        return self._answer

    @property
    def base_offset(self) -> int:
        return -1 if self.produce is None else self.produce.append.results[self.tp].base_offset

    def _finish(self) -> None:
        if self._answered:
            return
        self._answered = True
        code = ErrorCode.NONE
        if self.produce is not None:
            code = ErrorCode(self.produce.append.results[self.tp].error_code)
        if code != ErrorCode.NONE:
            self._answer = self._decision.failed(write_error(code))
            return
        self._core.records_committed(self._decision.records, self.base_offset)
        self._answer = self._decision.response


def start_write(
    core: GroupCoordinatorCore,
    state: BrokerState,
    decision: Decision[R],
    wall_ms: int,
    timeout_ms: int,
) -> DelayedWrite[R]:
    """Append the decision's records and replay them as uncommitted; the write to park (its
    `take_actions()` first: the append wakes the partition's waiters)."""
    if not decision.records:
        return DelayedWrite(core, decision, decision.response)
    p = decision.partition
    if core.partitions.get(p) is not PartitionLoad.LOADED:
        return DelayedWrite(core, decision, decision.failed(ErrorCode.NOT_COORDINATOR))
    batches = coordinator_batches(decision.records, wall_ms)
    request = ProduceRequest(
        acks=-1,
        timeout_ms=timeout_ms,
        topic_data=(ProduceTopicData(OFFSETS_TOPIC, (ProducePartitionData(p, batches),)),),
    )
    append = append_produce(state, request, wall_ms, internal=True)
    code = append.results[TopicPartition(OFFSETS_TOPIC, p)].error_code
    if code != ErrorCode.NONE:
        return DelayedWrite(core, decision, decision.failed(write_error(code)))
    for key, value in decision.records:
        core.replay(key, value, committed=False)
    return DelayedWrite(core, decision, produce=DelayedProduce(request, append), batches=batches)


class DelayedLoad:
    """An offsets partition replayed up to `end` by load `load_id`, waiting until its HW
    covers `end` to finish the load (`GroupCoordinatorCore.finish_load`). The log may end with
    commits the previous leader appended but never saw replicated (a next leader may lack
    them), and this broker's HW may lag commits that were acknowledged: until the HW covers
    them, clients are told COORDINATOR_LOAD_IN_PROGRESS and retry, so no OffsetFetch shows an
    offset that may vanish or one older than an acknowledged commit (Kafka's
    CoordinatorRuntime, too, serves a partition once its HW covers what it loaded).

    It completes without loading once it is no longer the partition's current load: leadership
    moved on, or the partition count changed and a new load began, even at the same leader
    epoch (writes.follow_leadership wakes the partition's key then, as a leadership change
    does). It has no deadline of its own; it expires only when the broker shuts down.
    `response()`: whether it loaded."""

    __slots__ = ("_core", "_partition", "end", "load_id", "loaded", "p", "watch_keys")

    def __init__(
        self,
        core: GroupCoordinatorCore,
        p: int,
        load_id: int,
        partition: Partition,
        end: int,
    ) -> None:
        self._core = core
        self.p = p
        self.load_id = load_id
        self._partition = partition
        self.end = end
        self.loaded = False
        self.watch_keys = (TopicPartition(OFFSETS_TOPIC, p),)

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        if not self._core.is_current_load(self.p, self.load_id):
            return True
        if self._partition.high_watermark < self.end:
            return False
        self._core.finish_load(self.p, now_ms)
        self.loaded = True
        return True

    def expire(self, now_ms: int) -> None:
        pass  # not loaded

    def take_actions(self) -> Actions:
        return NO_ACTIONS

    def response(self) -> bool:
        return self.loaded
