"""The nemesis: faults injected into real broker processes, each bounded in time and healed.

Kinds (durations from schedule.HOLD_S, chosen by a seeded RNG):
- kill: SIGKILL a broker, leave it down, start it again (a hard bounce);
- pause: SIGSTOP a broker (a stall shorter than its session), then SIGCONT;
- expire: SIGSTOP past its ZooKeeper session timeout: the session expires, it re-registers;
- bounce: SIGTERM (controlled shutdown), wait for the exit, start it again;
- corrupt: SIGKILL, damage one partition's files (active segment cut, bits flipped in its last
  batch, garbage appended, or .index files deleted), start: it must recover and catch up;
- partition: its link down (brokers in network namespaces only), shorter or longer than its
  session;
- lose-acks: the brokers' LossyProxy lose 20% of the answers (runs with lossy links only);
- reassign: one partition moved to two of its replicas, then back to all three in a new
  order (the operator's kafka-reassign-partitions); bounded waits for each move;
- elect: a preferred leader election for every partition of the topic (kafka-leader-election).
Targets: any broker, the controller, or the leader (or a follower) of a partition. Each step
is one fault or two overlapping ones (schedule.py); after a step the nemesis waits (bounded)
for the cluster to be whole. A corrupt step runs alone and only on a cluster whose every
partition has every broker in its ISR, and the next step waits until that holds again.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from client.admin import Admin
from client.errors import HighwaterClientError
from protocol.messages.elect_leaders import ElectionType
from tests.chaos.schedule import EXCLUSIVE, KINDS, Fault, Ledger, Step, plan_step
from tests.integration import disk_faults
from tests.integration.cluster_harness import BrokerProcess, Cluster, fetch_metadata
from tests.integration.lossy_proxy import LossyProxy
from tests.integration.netns import NetworkLab
from tests.integration.replication_checks import wait_whole

__all__ = ["KINDS", "Nemesis"]

_MOVE_WAIT_S = 60
_FULL_ISR_WAIT_S = 20
_LAG_S = 3.0  # past replica.lag.time.max.ms (2 s in the chaos runs): an ISR then means caught up


@dataclass(frozen=True)
class _Roles:
    controller: int | None
    leaders: dict[int, int]
    replicas: dict[int, tuple[int, ...]]


@dataclass
class Nemesis:
    cluster: Cluster
    rng: random.Random
    kinds: Sequence[str]
    topic: str
    session_timeout_ms: int
    interval_s: tuple[float, float] = (1.0, 3.0)
    proxies: Sequence[LossyProxy] = ()
    partitions: int = 1  # of `topic`
    lab: NetworkLab | None = None  # brokers in network namespaces: the partition nemesis
    overlap_share: float = 0.0  # of steps that are two overlapping faults
    heal_timeout_s: float = 60  # after a step, how long to wait for the cluster to be whole
    ledger: Ledger = field(default_factory=Ledger)
    log: list[str] = field(default_factory=list)
    log_path: Path | None = None
    steps: int = 0
    unhealed: int = 0  # steps after which the cluster was not whole within heal_timeout_s
    skipped: Counter[str] = field(default_factory=Counter)  # drawn but not injectable then
    _admin: Admin | None = None
    _full_isr_needed: bool = False
    _began_s: float = 0.0  # the last step was a corrupt: wait for full ISRs first

    @property
    def faults(self) -> Counter[str]:
        return Counter(self.ledger.by_kind())

    @property
    def session_s(self) -> float:
        return self.session_timeout_ms / 1000

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown nemeses {unknown}; known: {', '.join(KINDS)}")
        if "partition" in self.kinds and self.lab is None:
            raise ValueError("partition needs brokers in network namespaces (--netns)")
        if "lose-acks" in self.kinds and not self.proxies:
            raise ValueError("lose-acks needs lossy links (the brokers behind LossyProxy)")

    def note(self, line: str) -> None:
        """Into the log, and into `log_path` as it happens (a long run's story survives it)."""
        self.log.append(line)
        if self.log_path is not None:
            with self.log_path.open("a") as f:
                f.write(line + "\n")

    def _at(self) -> str:
        return f"at {trio.current_time() - self._began_s:.1f} s"

    async def run(self, stop: trio.Event) -> None:
        """Inject faults until `stop`; every fault is healed before this returns."""
        self._began_s = trio.current_time()
        async with Admin(self.cluster.bootstrap, request_timeout_ms=10_000) as admin:
            self._admin = admin
            try:
                await self._steps(stop)
            finally:
                self._admin = None

    async def _steps(self, stop: trio.Event) -> None:
        while not stop.is_set():
            with trio.move_on_after(self.rng.uniform(*self.interval_s)):
                await stop.wait()
            if stop.is_set():
                break
            step = plan_step(
                self.rng,
                self.kinds,
                self.partitions,
                overlap_share=self.overlap_share,
                session_s=self.session_s,
            )
            exclusive = any(f.kind in EXCLUSIVE for f in step.faults)
            if exclusive:
                for r in await self._restore():
                    self.note(f"restored: {r} ({self._at()})")
            if exclusive or self._full_isr_needed:
                full = await self._full_isrs(_FULL_ISR_WAIT_S)
                self._full_isr_needed = False
                if exclusive and not full:
                    self.skipped[step.name] += 1
                    continue  # not on a cluster missing a replica: draw again
            roles = await self._roles()
            targets = self._targets(step, roles)
            if targets is None:
                self.skipped[step.name] += 1
                continue
            self.steps += 1
            self.note(f"step {self.steps}: {step.name} ({self._at()})")
            async with trio.open_nursery() as nursery:
                for fault, broker in zip(step.faults, targets, strict=True):
                    nursery.start_soon(self._inject, step, fault, broker, roles)
            if exclusive:
                await trio.sleep(_LAG_S)
                self._full_isr_needed = True
            with trio.move_on_after(self.heal_timeout_s) as waited:
                await wait_whole(self.cluster, timeout_s=self.heal_timeout_s + 10)
            if waited.cancelled_caught:
                self.unhealed += 1

    # -- targets ---------------------------------------------------------------------------

    async def _roles(self) -> _Roles:
        brokers = self.cluster.running_brokers() or list(self.cluster.brokers.values())
        asked = self.rng.choice(brokers)
        meta = await fetch_metadata(asked.port, host=asked.host)
        if meta is None:
            return _Roles(None, {}, {})
        leaders, replicas = {}, {}
        for topic in meta.topics:
            if topic.name != self.topic:
                continue
            for p in topic.partitions:
                replicas[p.partition_index] = tuple(p.replica_nodes)
                if p.leader_id in self.cluster.brokers:
                    leaders[p.partition_index] = p.leader_id
        controller = meta.controller_id if meta.controller_id in self.cluster.brokers else None
        return _Roles(controller, leaders, replicas)

    def _targets(self, step: Step, roles: _Roles) -> list[int | None] | None:
        """A broker per fault (None for the cluster-wide ones), two faults never on one
        broker; None when a role has no one now (no controller, no leader)."""
        chosen: list[int | None] = []
        everyone = sorted(self.cluster.brokers)
        leader = roles.leaders.get(step.partition)
        for fault in step.faults:
            taken = {b for b in chosen if b is not None}
            broker: int | None
            if fault.role == "cluster":
                broker = None
            elif fault.role == "controller":
                broker = roles.controller
            elif fault.role == "leader":
                broker = leader
            elif fault.role == "follower":
                replicas = roles.replicas.get(step.partition, tuple(everyone))
                followers = [b for b in replicas if b != leader and b not in taken]
                broker = self.rng.choice(followers) if followers else None
            else:
                free = [b for b in everyone if b not in taken]
                broker = self.rng.choice(free) if free else None
            if fault.role != "cluster":
                if broker is None:
                    return None
                if broker in taken:  # the controller also leads, say: someone else
                    broker = self.rng.choice([b for b in everyone if b not in taken])
            chosen.append(broker)
        return chosen

    # -- faults ----------------------------------------------------------------------------

    async def _inject(self, step: Step, fault: Fault, broker: int | None, roles: _Roles) -> None:
        await trio.sleep(fault.delay_s)
        target = "cluster" if broker is None else f"broker {broker} ({fault.role})"
        number = self.ledger.start(fault.kind, target, trio.current_time())
        try:
            what = await self._apply(fault, broker, step.partition, roles)
        except Exception as exc:  # the harness failed (not the cluster): say so, heal, go on
            what = f"the fault failed: {exc!r}"
            self.heal()
        finally:
            self.ledger.heal(number, trio.current_time())
        self.note(f"  #{number} {fault.kind} {target}: {what} ({self._at()})")

    async def _apply(
        self, fault: Fault, broker_id: int | None, partition: int, roles: _Roles
    ) -> str:
        kind, hold_s = fault.kind, fault.hold_s
        if broker_id is None:
            if kind == "lose-acks":
                return await self._lose_acks(hold_s)
            if kind == "reassign":
                return await self._reassign(partition, roles)
            if kind == "elect":
                return await self._elect()
            raise ValueError(f"{kind} needs a broker")
        broker = self.cluster.brokers[broker_id]
        if kind == "kill":
            await trio.to_thread.run_sync(broker.kill)
            await trio.sleep(hold_s)
            broker.start()
            return f"SIGKILL, down {hold_s:.1f} s"
        if kind in ("pause", "expire"):
            broker.pause()
            try:
                await trio.sleep(hold_s)
            finally:
                broker.resume()
            return f"SIGSTOP {hold_s:.1f} s"
        if kind == "partition":
            if self.lab is None:
                raise ValueError("partition needs brokers in network namespaces (--netns)")
            self.lab.cut(broker_id)
            try:
                await trio.sleep(hold_s)
            finally:
                self.lab.heal(broker_id)
            return f"off the network {hold_s:.1f} s"
        if kind == "corrupt":
            await trio.to_thread.run_sync(broker.kill)
            damage = self._damage(broker)
            broker.start()
            return damage
        if kind == "bounce":
            status = await trio.to_thread.run_sync(broker.stop)
            broker.start()
            return f"SIGTERM, exited {status}"
        raise ValueError(f"unknown nemesis {kind!r}; known: {', '.join(KINDS)}")

    async def _lose_acks(self, hold_s: float) -> str:
        if not self.proxies:
            raise ValueError("lose-acks needs lossy links (the brokers behind LossyProxy)")
        for proxy in self.proxies:
            proxy.armed = True
        try:
            await trio.sleep(hold_s)
        finally:
            for proxy in self.proxies:
                proxy.armed = False
        return f"answers lost for {hold_s:.1f} s"

    async def _reassign(self, partition: int, roles: _Roles) -> str:
        """To two of the brokers, then back to all in a new order (a new preferred leader)."""
        everyone = sorted(self.cluster.brokers)
        current = list(roles.replicas.get(partition, everyone))
        steps = []
        if sorted(current) == everyone:
            steps.append(await self._move(partition, self.rng.sample(current, len(current) - 1)))
        steps.append(await self._move(partition, self.rng.sample(everyone, len(everyone))))
        return "; ".join(steps)

    async def _move(self, partition: int, target: list[int]) -> str:
        """Reassign (asking again while there is no controller to ask, as an operator would)
        and wait (bounded) until the move is done."""
        assert self._admin is not None
        tp = (self.topic, partition)
        began = trio.current_time()
        what = f"partition {partition} to {target}"
        try:
            result = None
            with trio.move_on_after(_MOVE_WAIT_S):
                while result is None:
                    try:
                        (result,) = await self._admin.alter_partition_reassignments({tp: target})
                    except HighwaterClientError as exc:
                        if not exc.retriable:
                            raise
                        what += f" (asked again after {exc.name})"
                        await trio.sleep(0.5)
            if result is None:
                return f"{what}: no controller took it in {_MOVE_WAIT_S} s"
            if result.error_code:
                return f"{what}: {result.error_code.name}"
            with trio.move_on_after(_MOVE_WAIT_S):
                while True:
                    try:
                        ongoing = await self._admin.list_partition_reassignments()
                    except HighwaterClientError:
                        ongoing = None  # no controller for a moment: ask again
                    if ongoing is not None and all((r.topic, r.partition) != tp for r in ongoing):
                        return f"{what} in {trio.current_time() - began:.1f} s"
                    await trio.sleep(0.2)
        except HighwaterClientError as exc:
            return f"{what}: {exc}"
        return f"{what}: still moving after {_MOVE_WAIT_S} s"

    async def _elect(self) -> str:
        assert self._admin is not None
        tps = [(self.topic, p) for p in range(self.partitions)]
        try:
            results = await self._admin.elect_leaders(ElectionType.PREFERRED, tps)
        except HighwaterClientError as exc:
            return f"preferred election: {exc}"
        return "preferred election: " + ", ".join(
            f"{r.partition} {r.error_code.name}" for r in results
        )

    def _damage(self, broker: BrokerProcess) -> str:
        partition_dir = broker.partition_dir(self.topic, self.rng.randrange(self.partitions))
        segments = disk_faults.segment_files(partition_dir)
        if not segments or segments[-1].stat().st_size == 0:
            return f"{partition_dir.name}: nothing to damage"
        active = segments[-1]
        size = active.stat().st_size
        how = self.rng.choice(["cut", "flip", "garbage", "index"])
        if how == "cut":
            at = self.rng.randrange(size)
            disk_faults.cut_at(active, at)
            return f"{partition_dir.name}/{active.name} cut at byte {at} of {size}"
        if how == "flip":
            spans, _ = disk_faults.batch_spans(active)
            start = spans[-1][0] + 16 if spans else 0  # bytes the CRC protects
            bits = disk_faults.flip_bits(active, start, size, self.rng, count=3)
            return f"{partition_dir.name}/{active.name} bits flipped at {bits}"
        if how == "garbage":
            disk_faults.append_garbage(active, self.rng.randrange(1, 200), self.rng)
            return f"{partition_dir.name}/{active.name} garbage appended"
        deleted = disk_faults.delete_index_files(partition_dir, ".index")
        return f"{partition_dir.name}: {len(deleted)} .index files deleted"

    # -- cluster state ---------------------------------------------------------------------

    async def _full_isrs(self, timeout_s: float) -> bool:
        """Until every partition of the topic has every broker in its ISR (as the brokers'
        metadata says, asked of each); False if not within `timeout_s`."""
        everyone = set(self.cluster.brokers)
        with trio.move_on_after(timeout_s):
            while True:
                if await self._isrs_full(everyone):
                    return True
                await trio.sleep(0.3)
        return False

    async def _isrs_full(self, everyone: set[int]) -> bool:
        for broker in self.cluster.brokers.values():
            meta = await fetch_metadata(broker.port, host=broker.host)
            if meta is None:
                return False
            for topic in meta.topics:
                if topic.name == self.topic and any(
                    set(p.isr_nodes) != everyone or set(p.replica_nodes) != everyone
                    for p in topic.partitions
                ):
                    return False
        return True

    async def restore(self) -> list[str]:
        """Every partition back on every broker (an unfinished reassign may have left one on
        fewer), so that every replica can be compared at the end."""
        async with Admin(self.cluster.bootstrap, request_timeout_ms=10_000) as admin:
            self._admin = admin
            try:
                return await self._restore()
            finally:
                self._admin = None

    async def _restore(self) -> list[str]:
        everyone = sorted(self.cluster.brokers)
        roles = await self._roles()
        done = []
        for p in range(self.partitions):
            current = list(roles.replicas.get(p, everyone))
            if sorted(current) != everyone:
                target = [*current, *(b for b in everyone if b not in current)]
                done.append(await self._move(p, target))
        return done

    def heal(self) -> None:
        """Everything running, unpaused and connected (a cancelled fault may have left one
        down), no answers lost."""
        for proxy in self.proxies:
            proxy.armed = False
        if self.lab is not None:
            for broker_id in self.cluster.brokers:
                self.lab.heal(broker_id)
        self.cluster.ensure_running()
