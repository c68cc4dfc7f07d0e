"""A whole simulated cluster: wiring, the step loop, the quiet ending and the final checks.

`run_seed(seed, directory)` is a whole run: brokers start and elect a controller, which
creates the topic's partitions; then for `chaos_steps` steps the producer writes and the
nemesis strikes; then the network heals, crashed brokers restart, and the cluster must
settle (every replica in the ISR, identical logs, every protected ack readable) within
`settle_ms_max`. Invariants are checked after every step. A failure raises
`SimulationFailure` naming the seed, the step, the replay command and the last steps.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

from broker.config.log_config import LogConfig
from controller import zk_data
from controller.zk_topics import create_topic
from controller.zk_types import WatchEvent
from protocol.records import decode_batches
from protocol.topic_partition import OFFSETS_TOPIC, TopicPartition
from tests.simulation import compaction
from tests.simulation.acl_workload import AclWorkload
from tests.simulation.auth_invariants import AuthInvariants
from tests.simulation.broker import SimBroker
from tests.simulation.config import SimConfig
from tests.simulation.config_invariants import ConfigInvariants
from tests.simulation.disk import BatchInfo, MirroredLog
from tests.simulation.groups import GROUP, GroupWorkload
from tests.simulation.idempotence import ProducerStateInvariants
from tests.simulation.invariants import Invariants, InvariantViolation
from tests.simulation.nemesis import (
    Nemesis,
    crash_broker,
    free_disk,
    may_restart,
    restart_broker,
)
from tests.simulation.network import CLIENT_NODE, Envelope, Network
from tests.simulation.operator import Operator
from tests.simulation.operator_invariants import OperatorInvariants
from tests.simulation.producer import Producer
from tests.simulation.scheduler import Scheduler
from tests.simulation.session_invariants import SessionInvariants
from tests.simulation.world import World
from tests.simulation.zk import SimZk

__all__ = ["SimCluster", "SimReport", "SimulationFailure", "quiet_logs", "run_seed"]

START_MS = 1_700_000_000_000
TOPIC = "t"
COMPACTED_TOPIC = "c"
SETTLE_CHECK_INTERVAL_MS = 100
TRACE_TAIL = 60


class SimulationFailure(AssertionError):
    pass


@dataclass
class SimReport:
    seed: int
    steps: int = 0
    sim_ms: int = 0
    produced: int = 0
    acked: int = 0
    unprotected_acks: int = 0  # every holder crashed or left the ISR: loss allowed
    lost_unprotected_acks: int = 0  # ... and actually lost (protected ones never are)
    crashes: int = 0
    controllers: int = 0
    nemesis_actions: list[str] = field(default_factory=list)
    produce_outcomes: dict[str, int] = field(default_factory=dict)
    messages_dropped: int = 0
    operator: dict[str, int] = field(default_factory=dict)  # what the operator got done
    cleanings: int = 0  # cleaned segments swapped in (compacted topic)
    group: dict[str, int] = field(default_factory=dict)  # what the group workload saw
    fetch_sessions: dict[str, int] = field(default_factory=dict)  # KIP-227, exercised
    idempotence: dict[str, int] = field(default_factory=dict)  # the idempotent producer's
    authorization: dict[str, int] = field(default_factory=dict)  # decisions, refusals, ACLs
    configs: dict[str, int] = field(default_factory=dict)  # dynamic config changes applied


class SimCluster:
    def __init__(
        self,
        seed: int,
        directory: Path,
        config: SimConfig | None = None,
        *,
        out: Callable[[str], None] | None = None,
    ) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self._out = out
        self._recent: deque[str] = deque(maxlen=TRACE_TAIL)
        self.steps = 0
        rng = random.Random(seed)
        n = self.config.brokers
        replicas = self.config.replication_factor
        assignment = {
            p: tuple(1 + (p + i) % n for i in range(replicas))
            for p in range(self.config.partitions)
        }
        zk = SimZk()
        zk.deliver = self._deliver_watch
        self.admin_session = zk.open_session(CLIENT_NODE)  # an operator's tools
        zk.run(self.admin_session, create_topic(TOPIC, assignment, {}))
        compacted = set()
        if self.config.compacted_topic:
            retention_ms = rng.choice(self.config.delete_retention_ms_choices)
            config = {
                "cleanup.policy": "compact",
                "delete.retention.ms": str(retention_ms),
                "segment.bytes": str(rng.choice((600, 1_500))),  # segments roll: cleanable
            }
            zk.run(self.admin_session, create_topic(COMPACTED_TOPIC, assignment, config))
            compacted.add(COMPACTED_TOPIC)
        if self.config.consumer_groups:  # as the first FindCoordinator would create it
            offsets = {
                p: tuple(1 + (p + i) % n for i in range(replicas))
                for p in range(self.config.offsets_partitions)
            }
            config = {
                "cleanup.policy": "compact",
                "segment.bytes": str(rng.choice((4096, 1 << 20))),
            }
            zk.run(self.admin_session, create_topic(OFFSETS_TOPIC, offsets, config))
            if self.config.compacted_topic:  # the sim's cleaners clean it too
                compacted.add(OFFSETS_TOPIC)
        self.world = World(
            seed=seed,
            config=self.config,
            rng=rng,
            scheduler=Scheduler(START_MS),
            zk=zk,
            compacted=compacted,
            log_config=LogConfig(segment_bytes=rng.choice(self.config.segment_bytes_choices)),
            replica_fetch_max_bytes=rng.choice(self.config.replica_fetch_max_bytes_choices),
            trace=self.trace,
        )
        scheduler = self.world.scheduler
        zk.clock = lambda: scheduler.now_ms
        for broker_id in range(1, n + 1):
            self.world.brokers[broker_id] = SimBroker(
                self.world, broker_id, directory / f"broker-{broker_id}"
            )
        self.world.network = Network(
            self.world.scheduler,
            rng,
            delay_ms=self.config.network_delay_ms,
            drop_probability=self.config.drop_probability,
            incarnation_of=self._incarnation_of,
            deliver_request=self._deliver,
        )
        self.invariants = Invariants(self.world)
        self.operator_invariants = OperatorInvariants(self.world, self.invariants)
        self.session_invariants = SessionInvariants(self.world)
        self.producer = Producer(self.world, self.invariants)
        self.producer_state_invariants = ProducerStateInvariants(self.world)
        self.operator = Operator(self.world, self.admin_session)
        self.nemesis = Nemesis(self.world, self.operator)
        self.group = (
            GroupWorkload(self.world, TOPIC, self.invariants)
            if self.config.consumer_groups
            else None
        )
        self.config_invariants = (
            ConfigInvariants(self.world, self.admin_session)
            if self.config.dynamic_configs
            else None
        )
        self.acl_workload: AclWorkload | None = None
        self.auth_invariants: AuthInvariants | None = None
        if self.config.authorizer:
            group = GROUP if self.config.consumer_groups else None
            self.acl_workload = AclWorkload(self.world, self.admin_session, group)
            self.auth_invariants = AuthInvariants(self.world, self.admin_session)

    # -- wiring ----------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        return self.world.now_ms - START_MS

    def _incarnation_of(self, node: int) -> int | None:
        if node == CLIENT_NODE:
            return 0
        broker = self.world.brokers.get(node)
        return broker.incarnation if broker is not None and broker.alive else None

    def _deliver(self, envelope: Envelope) -> None:
        self.world.brokers[envelope.dst].handle_request(envelope)

    def _deliver_watch(self, session: int, event: WatchEvent) -> None:
        """A fired ZooKeeper watch reaches the broker holding the session, a little later."""
        world = self.world
        for broker in world.brokers.values():
            if broker.alive and broker.session_id == session:
                delay_ms = world.draw(world.config.zk_latency_ms)

                def deliver(broker: SimBroker = broker) -> None:
                    if broker.session_id == session:
                        broker.on_watch(event)

                broker.after(delay_ms, f"watch {event.kind.value} {event.path}", deliver)

    def trace(self, line: str) -> None:
        entry = f"[{self.steps:>5} t={self.now_ms:>6}] {line}"
        self._recent.append(entry)
        if self._out is not None:
            self._out(entry)

    def partitions(self) -> list[TopicPartition]:
        return sorted(
            TopicPartition(t, p) for t, parts in self.world.zk.assignments.items() for p in parts
        )

    # -- running ---------------------------------------------------------------------------

    def start(self) -> None:
        for broker in self.world.brokers.values():
            broker.start()
        if self.config.enable_producer:
            self.producer.start()
        if self.config.enable_nemesis:
            self.nemesis.start()
        if self.group is not None:
            self.group.start()
        if self.acl_workload is not None:
            self.acl_workload.start()

    def step(self) -> bool:
        """Run one event and check the invariants; False when nothing is left to run."""
        event = self.world.scheduler.pop()
        if event is None:
            return False
        self.steps += 1
        self.trace(event.label)
        try:
            event.action()
            self.operator_invariants.check()
            self.invariants.check()
            self.session_invariants.check()
            if self.config.idempotent_producer:
                self.producer_state_invariants.check()
            if self.group is not None:
                self.group.check()
            if self.auth_invariants is not None:
                self.auth_invariants.check()
            if self.config_invariants is not None:
                self.config_invariants.check()
        except InvariantViolation as exc:
            self.fail(str(exc))
        return True

    def run_for(self, duration_ms: int) -> None:
        deadline_ms = self.world.now_ms + duration_ms
        while self.world.scheduler.now_ms < deadline_ms and self.step():
            pass

    def run_until(self, condition: Callable[[], bool], timeout_ms: int, what: str) -> None:
        deadline_ms = self.world.now_ms + timeout_ms
        while not condition():
            if self.world.now_ms >= deadline_ms or not self.step():
                self.fail(f"timed out waiting for {what}")

    def fail(self, what: str) -> None:
        replay = f"python -m tests.simulation.replay --seed {self.seed}"
        if self.config.chaos_steps != SimConfig().chaos_steps:
            replay += f" --steps {self.config.chaos_steps}"
        if self.config.enable_operator:
            replay += " --operator"
        if self.config.compacted_topic:
            replay += " --compacted"
        if self.config.group_classic_members:
            replay += " --classic"
        elif self.config.consumer_groups:
            replay += " --groups"
        if self.config.idempotent_producer:
            replay += " --idempotent"
        if self.config.authorizer:
            replay += " --authorizer"
        if self.config.dynamic_configs:
            replay += " --dynamic-configs"
        raise SimulationFailure(
            f"simulation seed {self.seed} failed at step {self.steps} (t={self.now_ms} ms): "
            f"{what}\nreplay: {replay}\nlast steps:\n" + "\n".join(self._recent)
        )

    def run(self) -> SimReport:
        self.start()
        while self.steps < self.config.chaos_steps and self.step():
            pass
        self.settle()
        self.check_final()
        return self.report()

    # -- the quiet ending ------------------------------------------------------------------

    def settle(self) -> None:
        """Stop the faults and the producer, heal, restart everyone; wait until converged."""
        self.producer.running = False
        self.nemesis.running = False
        if self.group is not None:
            self.group.quiet()
        if self.acl_workload is not None:
            self.acl_workload.running = False
        self.world.net.cut.clear()
        self.world.net.drop_probability = 0.0
        self.trace("QUIET: network healed, no more faults or produces")
        deadline_ms = self.world.now_ms + self.config.settle_ms_max
        next_check_ms = self.world.now_ms
        while True:
            if self.world.now_ms >= next_check_ms:
                for broker_id, broker in sorted(self.world.brokers.items()):
                    if broker.disk.full or (broker.alive and broker.offline_since):
                        self.trace(free_disk(self.world, broker_id))
                for broker_id in sorted(self.world.brokers):
                    if may_restart(self.world, broker_id):
                        self.trace(restart_broker(self.world, broker_id))
                problem = self.not_converged()
                if problem is None:
                    return
                next_check_ms = self.world.now_ms + SETTLE_CHECK_INTERVAL_MS
                if self.world.now_ms >= deadline_ms:
                    self.fail(f"did not converge after {self.config.settle_ms_max} ms: {problem}")
            if not self.step():
                self.fail(f"nothing left to run, and not converged: {self.not_converged()}")

    def not_converged(self) -> str | None:
        """Why the cluster is not settled yet, or None."""
        zk = self.world.zk
        for broker_id, broker in sorted(self.world.brokers.items()):
            registration = zk.brokers.get(broker_id)
            if not broker.alive or registration is None:
                return f"b{broker_id} is not registered"
        if zk.controller is None:
            return "no controller"
        if self.auth_invariants is not None:
            for broker_id, broker in sorted(self.world.brokers.items()):
                if broker.acls != self.auth_invariants.zk_acls():
                    return f"b{broker_id} does not hold ZooKeeper's ACLs"
        if zk.children(zk_data.DELETE_TOPICS_PATH):
            return f"topics not deleted yet: {zk.children(zk_data.DELETE_TOPICS_PATH)}"
        if zk.data(zk_data.REASSIGN_PARTITIONS_PATH) is not None:
            return "a reassignment is in progress"
        assignments = zk.assignments
        for broker_id, broker in sorted(self.world.brokers.items()):
            for tp in broker.logs:
                if broker_id not in assignments.get(tp.topic, {}).get(tp.partition, ()):
                    return f"b{broker_id} still holds a log of {tp}"
        for tp in self.partitions():
            problem = self._partition_not_converged(tp)
            if problem is not None:
                return f"{tp[0]}-{tp[1]}: {problem}"
        if self.group is not None:
            return self.group.not_converged(len(zk.assignments.get(TOPIC, {})))
        return None

    def _partition_not_converged(self, tp: TopicPartition) -> str | None:
        zk = self.world.zk
        replicas = zk.assignments[tp[0]][tp[1]]
        found = zk.state(tp)
        if found is None:
            return "no state znode"
        znode, version = found
        current = self.invariants.current_leader(tp)
        stale = ""
        if current is not None and current[1].partition_epoch != version:
            stale = (
                f"; stale partition epoch: leader b{current[0]} holds {current[1].partition_epoch}"
                f", ZooKeeper is at {version}, so its ISR writes cannot succeed"
            )
        if sorted(znode.isr) != sorted(replicas):
            return f"ISR {list(znode.isr)} in ZooKeeper (leader {znode.leader}){stale}"
        if current is None:
            return f"leader b{znode.leader} (epoch {znode.leader_epoch}) has not taken over"
        leader, partition = current
        if sorted(partition.isr) != sorted(replicas) or partition.pending_isr is not None:
            return f"leader b{leader} has ISR {list(partition.isr)}{stale}"
        if partition.high_watermark != partition.log_end_offset:
            return f"leader HW {partition.high_watermark} < LEO {partition.log_end_offset}"
        leader_log = self.world.brokers[leader].logs[tp]
        for broker_id in replicas:
            broker = self.world.brokers[broker_id]
            follower = broker.partitions.get(tp)
            if follower is None or follower.leader_epoch != znode.leader_epoch:
                return f"b{broker_id} has not learnt leader epoch {znode.leader_epoch}"
            if tp.topic in self.world.compacted:
                if follower.log_end_offset != partition.log_end_offset or self._latest_differs(
                    tp, broker_id, leader
                ):
                    return f"b{broker_id} has not caught up (compacted)"
            elif broker.logs[tp].batches != leader_log.batches:
                return f"b{broker_id} LEO {follower.log_end_offset} != {partition.log_end_offset}"
        return None

    def _latest_differs(self, tp: TopicPartition, a: int, b: int) -> str | None:
        """Compacted replicas: their latest records differ (each over its whole log)."""
        log_a, log_b = self.world.brokers[a].logs[tp], self.world.brokers[b].logs[tp]
        end = max(log_a.log_end_offset, log_b.log_end_offset)
        return compaction.disagreement(
            compaction.latest_records(log_a, end),
            compaction.latest_records(log_b, end),
            end,
            self.invariants.compaction_excuse(tp, (log_a, end), (log_b, end)),
        )

    # -- final checks ----------------------------------------------------------------------

    def check_final(self) -> None:
        """Logs identical on disk, and every protected ack readable by a consumer."""
        self.invariants.check_mirrors()
        if self.config.idempotent_producer:
            try:
                self.producer_state_invariants.check_all()
            except InvariantViolation as exc:
                self.fail(str(exc))
        for tp in self.partitions():
            replicas = self.world.zk.assignments[tp[0]][tp[1]]
            if tp.topic in self.world.compacted:  # cleaned independently: compare keys
                for broker_id in replicas[1:]:
                    problem = self._latest_differs(tp, replicas[0], broker_id)
                    if problem is not None:
                        self.fail(f"{tp}: b{broker_id} and b{replicas[0]} differ: {problem}")
                self._check_acked_readable(tp)
                continue
            on_disk: dict[int, list[BatchInfo]] = {}
            for broker_id in replicas:
                log = self.world.brokers[broker_id].logs[tp]
                on_disk[broker_id] = [
                    BatchInfo(h.base_offset, h.next_offset, h.partition_leader_epoch, h.crc)
                    for h in log.iter_batch_headers()
                ]
            first = on_disk[replicas[0]]
            for broker_id, batches in on_disk.items():
                if batches != first:
                    self.fail(f"{tp[0]}-{tp[1]}: b{broker_id}'s log differs from b{replicas[0]}'s")
            self._check_acked_readable(tp)

    def _check_acked_readable(self, tp: TopicPartition) -> None:
        current = self.invariants.current_leader(tp)
        assert current is not None
        _, partition = current
        values: dict[int, bytes | None] = {}
        offset = partition.log.log_start_offset
        while offset < partition.high_watermark:  # as a consumer reads: below the HW
            result = partition.read(offset, 1 << 20, replica_id=-1, min_one_batch=True)
            for batch in decode_batches(result.data.read()):
                for record in batch.records:
                    values[record.offset] = record.value
                offset = batch.header.next_offset
        for tracked in self.invariants.acks.get(tp, []):
            ack = tracked.ack
            if tp.topic in self.world.compacted:
                log = partition.log
                assert isinstance(log, MirroredLog)
                if tracked.holders and not compaction.holds(log, ack, self.world.tombstoned):
                    self.fail(f"acked {ack.values!r} at {tp}@{ack.base_offset}: its keys lost")
                continue
            found = tuple(values.get(ack.base_offset + i) for i in range(len(ack.values)))
            if found != ack.values and tracked.holders:
                self.fail(
                    f"acked {ack.values!r} at {tp[0]}-{tp[1]}@{ack.base_offset} reads {found!r}"
                )

    def lost_acks(self) -> list[tuple[bytes, ...]]:
        """Acked values the current leaders do not hold (only unprotected ones may be here)."""
        lost = []
        for tp, tracked in sorted(self.invariants.acks.items()):
            current = self.invariants.current_leader(tp)
            log = self.world.brokers[current[0]].logs[tp] if current is not None else None
            for t in tracked:
                if log is not None and tp.topic in self.world.compacted:
                    if not compaction.holds(log, t.ack, self.world.tombstoned):
                        lost.append(t.ack.values)
                    continue
                batch = log.batch_at(t.ack.base_offset) if log is not None else None
                if batch is None or batch.crc != t.ack.crc:
                    lost.append(t.ack.values)
        return lost

    def report(self) -> SimReport:
        unprotected = self.invariants.unprotected()
        return SimReport(
            seed=self.seed,
            steps=self.steps,
            sim_ms=self.now_ms,
            produced=self.producer.sent,
            acked=self.invariants.acked_count(),
            unprotected_acks=len(unprotected),
            lost_unprotected_acks=len(self.lost_acks()),
            crashes=sum(b.crashes for b in self.world.brokers.values()),
            controllers=self.world.controller_count,
            nemesis_actions=list(self.nemesis.actions),
            produce_outcomes=dict(self.producer.outcomes),
            messages_dropped=self.world.net.dropped,
            operator=self.operator_invariants.done(),
            cleanings=self.world.cleanings,
            group=dict(self.group.counts) if self.group is not None else {},
            fetch_sessions=self._session_counts(),
            idempotence=self._idempotence_counts(),
            authorization=self._authorization_counts(),
            configs=self._config_counts(),
        )

    def _config_counts(self) -> dict[str, int]:
        if self.config_invariants is None:
            return {}
        altered = sum(a.startswith("alter configs") for a in self.nemesis.actions)
        return {**self.config_invariants.counts, "alterations": altered}

    def _idempotence_counts(self) -> dict[str, int]:
        idempotent = self.producer.idempotent
        if idempotent is None:
            return {}
        return dict(idempotent.counts + self.producer_state_invariants.counts)

    def _authorization_counts(self) -> dict[str, int]:
        if self.auth_invariants is None or self.acl_workload is None:
            return {}
        return dict(self.auth_invariants.counts + self.acl_workload.counts)

    def _session_counts(self) -> dict[str, int]:
        counts = Counter(self.session_invariants.counts)
        for broker in self.world.brokers.values():
            counts.update(broker.fetch_sessions_seen)
        return dict(counts)

    def close(self) -> None:
        for broker in self.world.brokers.values():
            if broker.alive:
                broker.close()

    # -- scripting (scenario tests) --------------------------------------------------------

    def boot(self, timeout_ms: int = 10_000) -> None:
        """Start the brokers (and the producer/nemesis if configured); wait until settled."""
        self.start()
        self.wait_settled(timeout_ms)

    def wait_settled(self, timeout_ms: int = 10_000) -> None:
        self.run_until(lambda: self.not_converged() is None, timeout_ms, "the cluster to settle")

    def leader_of(self, tp: TopicPartition) -> int:
        found = self.world.zk.state(TopicPartition(*tp))
        return found[0].leader if found is not None else -1

    def zk_isr(self, tp: TopicPartition) -> tuple[int, ...]:
        found = self.world.zk.state(TopicPartition(*tp))
        return found[0].isr if found is not None else ()

    def controller_id(self) -> int | None:
        controller = self.world.zk.controller
        return controller[0] if controller is not None else None

    def broker(self, broker_id: int) -> SimBroker:
        return self.world.brokers[broker_id]

    def produce(self, tp: TopicPartition, *values: bytes) -> None:
        """One batch per value, to the leader ZooKeeper names, in order."""
        for value in values:
            assert self.producer.produce(tp, [value]), f"{tp} has no leader"

    def produce_batch(self, tp: TopicPartition, values: list[bytes]) -> None:
        """All `values` in one batch (they get consecutive offsets at once)."""
        assert self.producer.produce(tp, values), f"{tp} has no leader"

    def acked_values(self, tp: TopicPartition) -> list[bytes]:
        return [v for t in self.invariants.acks.get(tp, []) for v in t.ack.values]

    def wait_acked(self, tp: TopicPartition, *values: bytes, timeout_ms: int = 5_000) -> None:
        wanted = set(values)
        self.run_until(
            lambda: wanted <= set(self.acked_values(tp)), timeout_ms, f"acks for {values!r}"
        )

    def crash(
        self,
        broker_id: int,
        keep: Literal["random", "all", "flushed"] = "all",
        torn: bool | None = False,
    ) -> None:
        self.trace(f"SCRIPT: {crash_broker(self.world, broker_id, keep, torn)}")

    def restart(self, broker_id: int) -> None:
        self.trace(f"SCRIPT: {restart_broker(self.world, broker_id)}")

    def flush(self, broker_id: int) -> None:
        """fsync the broker's logs and checkpoint its HWs (what a clean moment leaves)."""
        self.world.brokers[broker_id].flush()
        self.trace(f"SCRIPT: flush b{broker_id}")

    def isolate(self, broker_id: int) -> None:
        self.world.net.cut.add(broker_id)
        self.trace(f"SCRIPT: cut b{broker_id} off from its peers")

    def heal(self) -> None:
        self.world.net.cut.clear()
        self.trace("SCRIPT: heal the network")

    def pause_controller(self, paused: bool = True) -> None:
        self.world.controller_paused = paused
        self.trace(f"SCRIPT: controller {'paused' if paused else 'resumed'}")


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """Silence the broker's structlog output for the duration (a run logs thousands of
    lines); the simulation's own trace says what happened."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        structlog.configure(**saved)


def run_seed(
    seed: int,
    directory: Path,
    config: SimConfig | None = None,
    *,
    out: Callable[[str], None] | None = None,
) -> SimReport:
    """One whole run; raises SimulationFailure if any invariant breaks."""
    with quiet_logs():
        cluster = SimCluster(seed, directory, config, out=out)
        try:
            return cluster.run()
        finally:
            cluster.close()
