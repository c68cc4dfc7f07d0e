"""An acks=all producer of unique values.

It sends one batch at a time (several may be in flight) to the leader that ZooKeeper names
for a random partition, and counts the answers. Which produces were acknowledged is recorded
by the leader at the moment it acknowledges (see `World.on_ack`), so an ack whose response is
lost on the way still counts: the record was committed either way. With
`idempotent_producer` the plain topic's batches go through an `IdempotentProducer` instead
(idempotence.py). With `authorizer` each batch goes out as one of the client principals.
"""

from __future__ import annotations

from collections import Counter

from broker.core.principal import Principal
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import Record, build_batch
from protocol.topic_partition import INTERNAL_TOPICS, TopicPartition
from tests.simulation.acl_workload import CLIENTS, Authenticated
from tests.simulation.idempotence import IdempotentProducer
from tests.simulation.invariants import Invariants
from tests.simulation.network import CLIENT_NODE
from tests.simulation.world import World

__all__ = ["Producer"]


class Producer:
    def __init__(self, world: World, invariants: Invariants) -> None:
        self.world = world
        self.sent = 0
        self.outcomes: Counter[str] = Counter()
        self._next_value = 0
        self.running = False
        self.idempotent = (
            IdempotentProducer(world, invariants, lambda: self.running)
            if world.config.idempotent_producer
            else None
        )

    def start(self) -> None:
        self.running = True
        self._schedule()

    def _schedule(self) -> None:
        if self.running:
            delay_ms = self.world.draw(self.world.config.produce_interval_ms)
            self.world.scheduler.after(delay_ms, "producer sends", self._tick)

    def _tick(self) -> None:
        if not self.running:
            return
        tps = sorted(tp for tp in self.world.zk.states if tp.topic not in INTERNAL_TOPICS)
        if tps:
            tp = self.world.rng.choice(tps)
            count = self.world.draw(self.world.config.records_per_batch)
            if tp.topic in self.world.compacted:
                self.produce_keyed(tp, [self._keyed() for _ in range(count)])
            elif self.idempotent is not None:
                self.sent += 1
                self.idempotent.add(tp, [self._value() for _ in range(count)])
            else:
                self.produce(tp, [self._value() for _ in range(count)])
        self._schedule()

    def _value(self) -> bytes:
        self._next_value += 1
        return f"s{self.world.seed}-v{self._next_value}".encode()

    def _keyed(self) -> Record:
        """A record of a compacted topic: one of a few keys; sometimes a tombstone."""
        config = self.world.config
        key = f"k{self.world.rng.randrange(config.compact_keys)}".encode()
        if self.world.rng.random() < config.tombstone_probability:
            return Record(None, key=key)
        return Record(self._value(), key=key)

    def produce_keyed(self, tp: TopicPartition, records: list[Record]) -> bool:
        for record in records:
            if record.value is None and record.key is not None:
                self.world.tombstoned.add((tp, record.key))
        return self.produce(tp, records)

    def produce(
        self,
        tp: tuple[str, int],
        values: list[bytes] | list[Record],
        principal: Principal | None = None,
    ) -> bool:
        """Send one batch to the partition's leader as ZooKeeper names it; False if none.
        With an authorizer, as `principal` (else a random client's)."""
        tp = TopicPartition(*tp)
        found = self.world.zk.state(tp)
        leader = found[0].leader if found is not None else -1
        if leader < 0:
            self.outcomes["no leader"] += 1
            return False
        records = build_batch(
            [v if isinstance(v, Record) else Record(v) for v in values], now_ms=self.world.now_ms
        )
        timeout_ms = self.world.config.produce_timeout_ms
        request = ProduceRequest(
            -1,
            timeout_ms,
            (ProduceTopicData(tp.topic, (ProducePartitionData(tp.partition, records),)),),
        )
        self.sent += 1
        payload: object = request
        if self.world.config.authorizer:  # as one of the client principals (acl_workload.py)
            payload = Authenticated(principal or self.world.rng.choice(CLIENTS), request)

        def answered(response: object) -> None:
            assert isinstance(response, ProduceResponse)
            code = response.responses[0].partition_responses[0].error_code
            self.outcomes[ErrorCode(code).name] += 1

        def timed_out() -> None:
            self.outcomes["no answer"] += 1

        self.world.net.request(
            CLIENT_NODE,
            leader,
            payload,
            timeout_ms=timeout_ms + self.world.config.request_timeout_ms,
            on_response=answered,
            on_timeout=timed_out,
            label=f"Produce {tp} -> b{leader}",
        )
        return True
