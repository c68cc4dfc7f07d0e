"""What must hold after every step of a simulation (and what must hold at its end).

After every step:
- at most one leader per (partition, leader epoch), ever, among brokers and in ZooKeeper;
- leader epochs only increase (in ZooKeeper, and on each broker process); so do controller
  epochs (in ZooKeeper, and as each broker process accepts them), one controller per epoch;
- a leader's HW never decreases while it leads in one epoch;
- an acks=all produce is acknowledged only with at least min.insync.replicas in the ISR;
- no acknowledged record is lost while an ISR member that holds it survives: each ack starts
  with the live ISR members holding it (every one of them that has not crashed since the
  append must hold it); a member leaves that set when it crashes or leaves the ISR in
  ZooKeeper, and rejoins it with the ISR if it holds the batch. While the set is not empty,
  the current leader's log must hold the batch (same base offset, same CRC);
- replicas agree below their HWs: any two replicas of one leader epoch that are "settled"
  (the leader, or a follower done truncating for that epoch) hold identical batches (base
  offset, leader epoch, CRC) below the smaller of their HWs;
- every so often, each log's in-memory batch list is checked against its segment files, and
  the leader epochs stamped in each log never go down along it;
- a controller never lets a broker lead a partition whose log that broker reported offline
  (KIP-112: it elects another ISR member, or none), and a log that went offline holds no torn
  batch (broker.py checks its files then). An offline replica stops holding acks, as a crash.
At the end (see cluster.py): every replica is in the ISR with an identical log, and every
acknowledged value that was not legitimately lost is readable from the leader.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from broker.core.partition import Partition
from protocol.topic_partition import TopicPartition
from tests.simulation import compaction
from tests.simulation.disk import BatchInfo, MirroredLog
from tests.simulation.world import Ack, World
from tests.simulation.zk import StateWrite

__all__ = ["InvariantViolation", "Invariants", "TrackedAck"]

MIRROR_CHECK_EVERY_STEPS = 64


class InvariantViolation(AssertionError):
    pass


@dataclass(slots=True)
class TrackedAck:
    ack: Ack
    holders: set[int]  # live ISR members holding it, as defined above


class Invariants:
    def __init__(self, world: World) -> None:
        self.world = world
        world.on_ack.append(self._on_ack)
        world.on_crash.append(self._on_crash)
        world.on_offline.append(self._on_offline)
        world.zk.on_state_written.append(self._on_state_written)
        self.acks: dict[TopicPartition, list[TrackedAck]] = defaultdict(list)
        self.leaders: dict[tuple[TopicPartition, int], int] = {}
        self.zk_leaders: dict[tuple[TopicPartition, int], int] = {}
        self.controllers: dict[int, int] = {}
        self._zk_controller_epoch = 0
        self._epochs: dict[tuple[int, int, TopicPartition], int] = {}
        self._controller_epochs: dict[tuple[int, int], int] = {}
        self._leader_hws: dict[tuple[int, int, TopicPartition, int], int] = {}
        self._acked_checked: dict[TopicPartition, tuple[int, ...]] = {}
        self._agreement_checked: dict[TopicPartition, tuple[tuple[int, ...], ...]] = {}
        self.history = compaction.History()  # compacted partitions' committed records
        self.steps = 0

    # -- hooks -------------------------------------------------------------------------------

    def _log_of(self, broker_id: int, tp: TopicPartition) -> MirroredLog | None:
        broker = self.world.brokers[broker_id]
        return broker.logs.get(tp) if broker.alive else None

    def _holds(self, broker_id: int, ack: Ack) -> bool:
        log = self._log_of(broker_id, ack.tp)
        if log is not None and ack.tp.topic in self.world.compacted:
            return compaction.holds(log, ack, self.world.tombstoned)
        batch = log.batch_at(ack.base_offset) if log is not None else None
        return batch is not None and batch.crc == ack.crc

    def _on_ack(self, ack: Ack) -> None:
        config = self.world.config
        min_isr = min(config.min_insync_replicas, config.replication_factor)
        if len(ack.isr) < min_isr:
            raise InvariantViolation(
                f"b{ack.leader} acked {_describe(ack)} with ISR {list(ack.isr)}, below "
                f"min.insync.replicas {min_isr}"
            )
        if not self._holds(ack.leader, ack):
            raise InvariantViolation(f"b{ack.leader} acked {_describe(ack)} it does not hold")
        holders = {ack.leader}
        for member in ack.isr:
            broker = self.world.brokers[member]
            if member == ack.leader or not broker.alive or ack.tp in broker.offline_since:
                continue
            if self._holds(member, ack):
                holders.add(member)
            elif broker.last_crash_ms < ack.appended_ms:
                raise InvariantViolation(
                    f"b{ack.leader} acked {_describe(ack)} with ISR {list(ack.isr)}, but ISR "
                    f"member b{member} (up, not crashed since the append) does not hold it"
                )
        self.acks[ack.tp].append(TrackedAck(ack, holders))

    def _on_crash(self, broker_id: int) -> None:
        for tracked in self.acks.values():
            for t in tracked:
                t.holders.discard(broker_id)

    def _on_offline(self, broker_id: int, tps: list[TopicPartition]) -> None:
        for tp in tps:
            for t in self.acks.get(tp, []):
                t.holders.discard(broker_id)

    def _on_state_written(self, write: StateWrite) -> None:
        znode, _ = write.new
        tp = write.tp
        if write.old is not None:
            old, _ = write.old
            if znode.leader_epoch < old.leader_epoch:
                raise InvariantViolation(
                    f"{_tp(tp)}: ZooKeeper leader epoch went from {old.leader_epoch} to "
                    f"{znode.leader_epoch} (session {write.session})"
                )
            removed = set(old.isr) - set(znode.isr)
            added = set(znode.isr) - set(old.isr)
            for t in self.acks[tp]:
                t.holders -= removed
                for member in sorted(added):
                    if t.holders and self._holds(member, t.ack):
                        t.holders.add(member)
        if znode.leader >= 0:
            owner = self.zk_leaders.setdefault((tp, znode.leader_epoch), znode.leader)
            if owner != znode.leader:
                raise InvariantViolation(
                    f"{_tp(tp)}: ZooKeeper names b{owner} and b{znode.leader} leaders of epoch "
                    f"{znode.leader_epoch}"
                )

    # -- every step ----------------------------------------------------------------------------

    def check(self) -> None:
        self.steps += 1
        self._check_controllers()
        self._check_offline_leaders()
        for broker_id, broker in self.world.brokers.items():
            if broker.alive:
                self._check_broker(broker_id, broker.incarnation, broker.controller_epoch)
        for tp in self._partitions():
            if tp.topic in self.world.compacted:
                self._observe_committed(tp)
            self._check_acked(tp)
            self._check_agreement(tp)
        if self.steps % MIRROR_CHECK_EVERY_STEPS == 0:
            self.check_mirrors()

    def _partitions(self) -> list[TopicPartition]:
        return sorted(
            TopicPartition(t, p) for t, parts in self.world.zk.assignments.items() for p in parts
        )

    def _check_controllers(self) -> None:
        zk = self.world.zk
        if zk.controller_epoch < self._zk_controller_epoch:
            raise InvariantViolation("the ZooKeeper controller epoch went down")
        self._zk_controller_epoch = zk.controller_epoch
        if zk.controller is not None:
            owner = self.controllers.setdefault(zk.controller_epoch, zk.controller[0])
            if owner != zk.controller[0]:
                raise InvariantViolation(
                    f"two controllers in controller epoch {zk.controller_epoch}: "
                    f"b{owner} and b{zk.controller[0]}"
                )

    def _check_offline_leaders(self) -> None:
        for broker in self.world.brokers.values():
            controller = broker.controller if broker.alive else None
            if controller is None or not controller.active or not controller.context.active:
                continue
            context = controller.context
            for tp, state in context.partition_states.items():
                leader = context.live_brokers.get(state.leader)
                if leader is not None and tp in leader.offline_partitions:
                    raise InvariantViolation(
                        f"controller b{broker.broker_id} lets b{state.leader} lead {_tp(tp)} "
                        f"(leader epoch {state.leader_epoch}) though its log is offline there"
                    )

    def _check_broker(self, broker_id: int, incarnation: int, controller_epoch: int) -> None:
        key = (broker_id, incarnation)
        if controller_epoch < self._controller_epochs.get(key, -1):
            raise InvariantViolation(
                f"b{broker_id} went back to controller epoch {controller_epoch}"
            )
        self._controller_epochs[key] = controller_epoch
        for tp, partition in self.world.brokers[broker_id].partitions.items():
            epoch = partition.leader_epoch
            epoch_key = (broker_id, incarnation, tp)
            if epoch < self._epochs.get(epoch_key, -1):
                raise InvariantViolation(
                    f"b{broker_id} {_tp(tp)}: leader epoch went back to {epoch}"
                )
            self._epochs[epoch_key] = epoch
            if partition.is_leader:
                self._check_leader(broker_id, incarnation, tp, partition)

    def _check_leader(
        self, broker_id: int, incarnation: int, tp: TopicPartition, partition: Partition
    ) -> None:
        epoch = partition.leader_epoch
        owner = self.leaders.setdefault((tp, epoch), broker_id)
        if owner != broker_id:
            raise InvariantViolation(
                f"{_tp(tp)}: b{owner} and b{broker_id} both led leader epoch {epoch}"
            )
        hw_key = (broker_id, incarnation, tp, epoch)
        last = self._leader_hws.get(hw_key, -1)
        if partition.high_watermark < last:
            raise InvariantViolation(
                f"b{broker_id} {_tp(tp)}: leader HW went from {last} to "
                f"{partition.high_watermark} in leader epoch {epoch}"
            )
        self._leader_hws[hw_key] = partition.high_watermark

    def current_leader(self, tp: TopicPartition) -> tuple[int, Partition] | None:
        """The leader ZooKeeper names, if it is up and has taken the leadership."""
        found = self.world.zk.state(tp)
        if found is None or found[0].leader < 0:
            return None
        znode = found[0]
        broker = self.world.brokers[znode.leader]
        partition = broker.partitions.get(tp) if broker.alive else None
        if partition is None or not partition.is_leader:
            return None
        if partition.leader_epoch != znode.leader_epoch:
            return None
        return znode.leader, partition

    def _check_acked(self, tp: TopicPartition) -> None:
        found = self.current_leader(tp)
        tracked = self.acks.get(tp)
        if found is None or not tracked:
            return
        leader, partition = found
        log = partition.log
        assert isinstance(log, MirroredLog)
        key = (leader, self.world.brokers[leader].incarnation, log.version, len(tracked))
        if self._acked_checked.get(tp) == key:
            return
        self._acked_checked[tp] = key
        for t in tracked:
            if not t.holders:
                continue
            if tp.topic in self.world.compacted:
                if not compaction.holds(log, t.ack, self.world.tombstoned):
                    raise InvariantViolation(
                        f"acked {_describe(t.ack)} is lost: leader b{leader} has no record of "
                        f"its keys at or after it, while ISR members {sorted(t.holders)} had it"
                    )
                continue
            batch = log.batch_at(t.ack.base_offset)
            if batch is None or batch.crc != t.ack.crc:
                raise InvariantViolation(
                    f"acked {_describe(t.ack)} is lost: leader b{leader} (epoch "
                    f"{partition.leader_epoch}) holds {batch} there, while ISR members "
                    f"{sorted(t.holders)}, which had it, have neither crashed nor left the ISR"
                )

    def _observe_committed(self, tp: TopicPartition) -> None:
        found = self.current_leader(tp)
        if found is not None:
            self.history.observe(tp, _log(found[1]), found[1].high_watermark)

    def compaction_excuse(
        self, tp: TopicPartition, a: tuple[MirroredLog, int], b: tuple[MirroredLog, int]
    ) -> Callable[[bytes], bool]:
        """What a cleaner may have removed by now from two replicas (log, HW) of `tp`
        (compaction.py): records superseded, tombstones older than delete.retention.ms."""
        retention_ms = a[0].config.delete_retention_ms
        return self.history.excuse(
            tp,
            self.world.now_ms - retention_ms,
            (compaction.latest_records(a[0], a[0].log_end_offset), a[1]),
            (compaction.latest_records(b[0], b[0].log_end_offset), b[1]),
        )

    def settled_replicas(self, tp: TopicPartition) -> list[tuple[int, Partition]]:
        """Leaders, and followers done truncating in their current leader epoch."""
        out = []
        for broker_id, broker in sorted(self.world.brokers.items()):
            partition = broker.partitions.get(tp) if broker.alive else None
            if partition is None:
                continue
            state = broker.fetch_state(tp)
            if partition.is_leader or (
                state is not None
                and state.leader_epoch == partition.leader_epoch
                and not state.truncating
            ):
                out.append((broker_id, partition))
        return out

    def _check_agreement(self, tp: TopicPartition) -> None:
        replicas = self.settled_replicas(tp)
        key = tuple(
            (b, p.leader_epoch, p.high_watermark, _log(p).version, id(p.log)) for b, p in replicas
        )
        if self._agreement_checked.get(tp) == key:
            return
        self._agreement_checked[tp] = key
        for i, (a, pa) in enumerate(replicas):
            for b, pb in replicas[i + 1 :]:
                if pa.leader_epoch != pb.leader_epoch:
                    continue
                below = min(pa.high_watermark, pb.high_watermark)
                if tp.topic in self.world.compacted:  # replicas clean independently
                    problem = compaction.disagreement(
                        compaction.latest_records(_log(pa), _log(pa).log_end_offset),
                        compaction.latest_records(_log(pb), _log(pb).log_end_offset),
                        below,
                        self.compaction_excuse(
                            tp, (_log(pa), pa.high_watermark), (_log(pb), pb.high_watermark)
                        ),
                    )
                    if problem is not None:
                        raise InvariantViolation(
                            f"{_tp(tp)}: b{a} (HW {pa.high_watermark}) and b{b} (HW "
                            f"{pb.high_watermark}) disagree on the latest records below "
                            f"{below}: {problem}"
                        )
                    continue
                batches_a = _log(pa).batches_below(below)
                batches_b = _log(pb).batches_below(below)
                if batches_a != batches_b:
                    raise InvariantViolation(
                        f"{_tp(tp)}: b{a} (HW {pa.high_watermark}) and b{b} (HW "
                        f"{pb.high_watermark}) disagree below {below} in leader epoch "
                        f"{pa.leader_epoch}: {_first_difference(batches_a, batches_b)}"
                    )

    def check_mirrors(self) -> None:
        for broker in self.world.brokers.values():
            if not broker.alive:
                continue
            for log in broker.logs.values():
                problem = log.verify_mirror()
                if problem is not None:
                    raise InvariantViolation(f"b{broker.broker_id}: {problem}")
                epochs = [b.leader_epoch for b in log.batches]
                if epochs != sorted(epochs):
                    raise InvariantViolation(
                        f"b{broker.broker_id} {log.directory.name}: batch leader epochs go "
                        f"down along the log: {epochs}"
                    )

    # -- reports -------------------------------------------------------------------------------

    def acked_count(self) -> int:
        return sum(len(t) for t in self.acks.values())

    def unprotected(self) -> list[TrackedAck]:
        """Acks whose every holder crashed or left the ISR: Kafka promises nothing for them."""
        return [t for tracked in self.acks.values() for t in tracked if not t.holders]


def _log(partition: Partition) -> MirroredLog:
    log = partition.log
    assert isinstance(log, MirroredLog)
    return log


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _describe(ack: Ack) -> str:
    values = b",".join(ack.values).decode()
    return (
        f"{_tp(ack.tp)}@{ack.base_offset}..{ack.next_offset - 1} [{values}] "
        f"(crc {ack.crc:#010x}, leader b{ack.leader} epoch {ack.leader_epoch}, "
        f"acked at t={ack.acked_ms})"
    )


def _first_difference(a: list[BatchInfo], b: list[BatchInfo]) -> str:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return f"{x} vs {y}"
    return f"{len(a)} batches vs {len(b)}"
