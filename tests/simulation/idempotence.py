"""The idempotent producer in the simulation (KIP-98), and what leadership changes must never
do to it.

`IdempotentProducer` sends acks=all batches with a producer id, epoch 0 and per-partition
sequences, one batch per partition in flight (so a refusal can only be about the batch
before it), to the leader ZooKeeper names. A batch is retried at the producer's next tick,
with the same bytes, until it is acknowledged: after a timeout, a lost answer,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS and the like; a resend the leader already holds is
answered as a duplicate.

What must hold (`InvariantViolation` otherwise, with the seed):
- No OUT_OF_ORDER_SEQUENCE_NUMBER from the current leader (ZooKeeper names it, in the leader
  epoch the batch was sent in) whose log holds the acknowledged batch before the refused
  one: with one batch in flight that is the producer's last batch there, so such a refusal
  means its producer state is behind its log. Refusals from a leader deposed without
  knowing it are counted and the batch retried; when the acknowledged batch before it is
  gone from the leader's log (lost with every holder, a power loss: invariants.py allows no
  other loss), the producer restarts with a new producer id, as an application would.
- `ProducerStateInvariants`: whenever a broker starts leading a partition in a new leader
  epoch, and at the end on every replica, its producer state is the one a replay of its whole
  log gives (Kafka's rebuild): nothing a follower appended, truncated or recovered was
  skipped.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from broker.log.producer_state import ProducerStateManager
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition
from tests.simulation.disk import MirroredLog
from tests.simulation.invariants import Invariants, InvariantViolation, TrackedAck
from tests.simulation.network import CLIENT_NODE
from tests.simulation.world import Ack, World

__all__ = ["IdempotentProducer", "ProducerStateInvariants", "producer_state_problem"]

FIRST_PRODUCER_ID = 1_000


@dataclass(slots=True)
class _Batch:
    values: tuple[bytes, ...]
    base_sequence: int
    records: bytes  # built once: a retry resends the same bytes (CRC, timestamps)
    attempts: int = 0


class IdempotentProducer:
    def __init__(self, world: World, invariants: Invariants, running: Callable[[], bool]) -> None:
        self.world = world
        self.invariants = invariants
        self._running = running
        self.producer_id = FIRST_PRODUCER_ID
        self.counts: Counter[str] = Counter()
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._next_sequence: dict[TopicPartition, int] = {}
        self._in_flight: set[TopicPartition] = set()
        self._acked: dict[TopicPartition, _Batch] = {}  # the newest acknowledged batch
        self._tracked: dict[tuple[bytes, ...], TrackedAck] = {}
        world.on_ack.append(self._on_ack)  # after Invariants' hook: its TrackedAck exists

    def _on_ack(self, ack: Ack) -> None:
        tracked = self.invariants.acks.get(ack.tp)
        if tracked and tracked[-1].ack is ack:
            self._tracked[ack.values] = tracked[-1]

    def add(self, tp: TopicPartition, values: list[bytes]) -> None:
        """Queue one batch of `values` for `tp`; it goes once the batch before it is acked."""
        sequence = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = sequence + len(values)
        records = build_batch(
            [Record(v) for v in values],
            producer_id=self.producer_id,
            producer_epoch=0,
            base_sequence=sequence,
            now_ms=self.world.now_ms,
        )
        self._queues.setdefault(tp, deque()).append(_Batch(tuple(values), sequence, records))
        self.retry()  # retries go at the producer's ticks

    def retry(self) -> None:
        """Send the next batch of every partition that has one and nothing in flight."""
        for waiting in sorted(self._queues):
            self._send(waiting)

    def unacked(self, tp: TopicPartition) -> int:
        """Batches of `tp` not acknowledged yet (in flight or queued)."""
        return len(self._queues.get(tp, ()))

    def _send(self, tp: TopicPartition) -> None:
        queue = self._queues.get(tp)
        if tp in self._in_flight or not queue or not self._running():
            return
        batch = queue[0]
        found = self.world.zk.state(tp)
        leader, epoch = (found[0].leader, found[0].leader_epoch) if found else (-1, -1)
        if leader < 0 or not self.world.brokers[leader].alive:
            self.counts["no live leader"] += 1  # a client's connection would be refused
            return
        self._in_flight.add(tp)
        batch.attempts += 1
        timeout_ms = self.world.config.produce_timeout_ms
        request = ProduceRequest(
            -1,
            timeout_ms,
            (ProduceTopicData(tp.topic, (ProducePartitionData(tp.partition, batch.records),)),),
        )
        producer_id = self.producer_id

        def answered(response: object) -> None:
            assert isinstance(response, ProduceResponse)
            answer = response.responses[0].partition_responses[0]
            self._answered(tp, batch, producer_id, leader, epoch, answer.error_code)

        def timed_out() -> None:
            self._answered(tp, batch, producer_id, leader, epoch, None)

        self.world.net.request(
            CLIENT_NODE,
            leader,
            request,
            timeout_ms=timeout_ms + self.world.config.request_timeout_ms,
            on_response=answered,
            on_timeout=timed_out,
            label=f"Produce {tp} pid {producer_id} seq {batch.base_sequence} -> b{leader}",
        )

    def _answered(
        self,
        tp: TopicPartition,
        batch: _Batch,
        producer_id: int,
        leader: int,
        epoch: int,
        code: int | None,
    ) -> None:
        if producer_id != self.producer_id:
            return  # an answer to the producer this one replaced (its in-flight set is new)
        self._in_flight.discard(tp)
        self.counts["no answer" if code is None else ErrorCode(code).name] += 1
        if code == ErrorCode.NONE:
            if batch.attempts > 1:
                self.counts["acked after a resend"] += 1
            self._queues[tp].popleft()
            self._acked[tp] = batch
            self._send(tp)
        elif code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            self._out_of_order(tp, batch, leader, epoch)

    def _out_of_order(self, tp: TopicPartition, batch: _Batch, leader: int, epoch: int) -> None:
        previous = self._acked.get(tp)
        tracked = self._tracked.get(previous.values) if previous is not None else None
        current = self.invariants.current_leader(tp)
        if tracked is None or current is None or current[0] != leader:
            self.counts["sequence errors from a leader deposed without knowing"] += 1
            return
        partition = current[1]
        log = partition.log
        assert isinstance(log, MirroredLog)
        held = log.batch_at(tracked.ack.base_offset)
        if partition.leader_epoch == epoch and held is not None and held.crc == tracked.ack.crc:
            entry = log.producer_state.producers.get(self.producer_id)
            raise InvariantViolation(
                f"b{leader}, leader of {tp[0]}-{tp[1]} in epoch {epoch}, refused sequence "
                f"{batch.base_sequence} of producer {self.producer_id} as out of order, though "
                f"its log holds the batch before it (acked at offset {tracked.ack.base_offset}, "
                f"ISR holders {sorted(tracked.holders)}); its producer state says last "
                f"sequence {entry.last_seq if entry else 'none'}"
            )
        if held is None or held.crc != tracked.ack.crc:
            # invariants.py allows this only for an ack every holder of which was lost.
            self.counts["producer restarts (an acked batch lost with every holder)"] += 1
            self._restart()
            return
        self.counts["sequence errors from a leader deposed without knowing"] += 1

    def _restart(self) -> None:
        """A new producer id, sequences from 0; unacknowledged batches are given up (their
        outcome unknown), as when an application starts a new producer."""
        self.producer_id += 1
        self._queues.clear()
        self._next_sequence.clear()
        self._in_flight.clear()
        self._acked.clear()


def producer_state_problem(log: MirroredLog) -> str | None:
    """None if the log's producer state is what a replay of all its batches gives."""
    replayed = ProducerStateManager()
    for header in log.iter_batch_headers():
        replayed.update(header)
    want = {p: (e.producer_epoch, list(e.batches)) for p, e in replayed.producers.items()}
    have = {p: (e.producer_epoch, list(e.batches)) for p, e in log.producer_state.producers.items()}
    if want == have:
        return None
    for producer_id in sorted(want.keys() | have.keys()):
        if want.get(producer_id) != have.get(producer_id):
            return (
                f"producer {producer_id}: the state holds {have.get(producer_id)}, a replay of "
                f"the log gives {want.get(producer_id)}"
            )
    return None  # unreachable: the dicts differ in some key


class ProducerStateInvariants:
    """See the module docstring: a new leader's producer state is its log's."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.counts: Counter[str] = Counter()
        self._checked: set[tuple[int, int, TopicPartition, int]] = set()

    def check(self) -> None:
        for broker_id, broker in sorted(self.world.brokers.items()):
            if not broker.alive:
                continue
            for tp, partition in sorted(broker.partitions.items()):
                if not partition.is_leader or tp.topic in self.world.compacted:
                    continue
                key = (broker_id, broker.incarnation, tp, partition.leader_epoch)
                if key in self._checked:
                    continue
                self._checked.add(key)
                self._check(broker_id, tp, f"on leading epoch {partition.leader_epoch}")

    def check_all(self) -> None:
        """Every replica (the end of a run)."""
        for broker_id, broker in sorted(self.world.brokers.items()):
            if broker.alive:
                for tp in sorted(broker.logs):
                    if tp.topic not in self.world.compacted:
                        self._check(broker_id, tp, "at the end")

    def _check(self, broker_id: int, tp: TopicPartition, when: str) -> None:
        log = self.world.brokers[broker_id].logs[tp]
        problem = producer_state_problem(log)
        if problem is not None:
            raise InvariantViolation(f"b{broker_id} {tp[0]}-{tp[1]} {when}: {problem}")
        if log.producer_state.producers:
            self.counts["producer states checked"] += 1
