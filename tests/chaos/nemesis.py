"""The nemesis: faults injected into real broker processes, one at a time, each healed.

Kinds (each bounded in time, chosen and timed by a seeded RNG):
- kill: SIGKILL a broker, leave it down 0.5-3 s, start it again (a hard bounce);
- pause: SIGSTOP a broker for 0.3-1.5 s, then SIGCONT (a stall shorter than its session);
- expire: SIGSTOP a broker for longer than its ZooKeeper session timeout, then SIGCONT: the
  session expires, its ephemeral znodes vanish, it re-registers (scenario 9's outcome);
- bounce: SIGTERM (controlled shutdown), wait for the exit, start it again;
- corrupt: SIGKILL a broker, then damage one partition of the stopped broker the way a crash
  or a bad disk does (cut the active segment at a random byte, flip bits in its last batch,
  append garbage, delete the .index files), start it again: it must recover a valid prefix and
  copy the rest from the leader;
- partition: cut a broker off the network (brokers in network namespaces only) for 1-3 s, or
  past its ZooKeeper session timeout (its session expires; if it led, a new leader is
  elected; it must truncate and rejoin after healing), then heal;
- lose-acks: for 1-3 s every new connection through the brokers' LossyProxy (runs with lossy
  links only) may deliver a request and lose its answer: the lost acknowledgement behind KIP-98.
Targets: a random broker, the controller, or the leader of partition 0. Between faults the
nemesis waits (bounded) for the cluster to be whole again, so at most one broker is faulty at a
time: with RF=3 and min.insync.replicas=2 acks=all writes can go on through every fault.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from tests.integration import disk_faults
from tests.integration.cluster_harness import BrokerProcess, Cluster, fetch_metadata
from tests.integration.lossy_proxy import LossyProxy
from tests.integration.netns import NetworkLab
from tests.integration.replication_checks import wait_whole

__all__ = ["KINDS", "Nemesis"]

KINDS = ("kill", "pause", "expire", "bounce", "corrupt", "partition", "lose-acks")


@dataclass
class Nemesis:
    cluster: Cluster
    rng: random.Random
    kinds: Sequence[str]
    topic: str
    session_timeout_ms: int
    interval_s: tuple[float, float] = (1.0, 3.0)
    proxies: Sequence[LossyProxy] = ()
    partitions: int = 1  # of `topic`, for the corrupt nemesis
    lab: NetworkLab | None = None  # brokers in network namespaces: the partition nemesis
    faults: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)

    async def run(self, stop: trio.Event) -> None:
        """Inject faults until `stop`; every fault is healed before this returns."""
        while not stop.is_set():
            with trio.move_on_after(self.rng.uniform(*self.interval_s)):
                await stop.wait()
            if stop.is_set():
                break
            kind = self.rng.choice(list(self.kinds))
            broker = await self._target()
            self.log.append(f"{kind} broker {broker.broker_id}")
            await self._apply(kind, broker)
            self.faults[kind] += 1
            with trio.move_on_after(60):
                await wait_whole(self.cluster, timeout_s=60)

    async def _target(self) -> BrokerProcess:
        brokers = self.cluster.brokers
        choice = self.rng.choice(["any", "controller", "leader"])
        asked = self.rng.choice(list(brokers.values()))
        meta = await fetch_metadata(asked.port, host=asked.host)
        if meta is not None and choice == "controller" and meta.controller_id in brokers:
            return brokers[meta.controller_id]
        if meta is not None and choice == "leader":
            for topic in meta.topics:
                for p in topic.partitions:
                    if (
                        topic.name == self.topic
                        and p.partition_index == 0
                        and p.leader_id in brokers
                    ):
                        return brokers[p.leader_id]
        return brokers[self.rng.choice(sorted(brokers))]

    async def _apply(self, kind: str, broker: BrokerProcess) -> None:
        if kind == "kill":
            await trio.to_thread.run_sync(broker.kill)
            await trio.sleep(self.rng.uniform(0.5, 3.0))
            broker.start()
        elif kind == "pause":
            broker.pause()
            try:
                await trio.sleep(self.rng.uniform(0.3, 1.5))
            finally:
                broker.resume()
        elif kind == "expire":
            broker.pause()
            try:
                await trio.sleep(self.session_timeout_ms / 1000 + self.rng.uniform(0.5, 1.5))
            finally:
                broker.resume()
        elif kind == "partition":
            if self.lab is None:
                raise ValueError("partition needs brokers in network namespaces (--netns)")
            long = self.rng.random() < 0.5
            cut_s = (
                self.session_timeout_ms / 1000 + self.rng.uniform(0.5, 2.0)
                if long
                else self.rng.uniform(1.0, 3.0)
            )
            self.lab.cut(broker.broker_id)
            try:
                await trio.sleep(cut_s)
            finally:
                self.lab.heal(broker.broker_id)
        elif kind == "corrupt":
            await trio.to_thread.run_sync(broker.kill)
            self.log.append(f"broker {broker.broker_id}: {self._damage(broker)}")
            broker.start()
        elif kind == "lose-acks":
            if not self.proxies:
                raise ValueError("lose-acks needs lossy links (the brokers behind LossyProxy)")
            for proxy in self.proxies:
                proxy.armed = True
            try:
                await trio.sleep(self.rng.uniform(1.0, 3.0))
            finally:
                for proxy in self.proxies:
                    proxy.armed = False
        elif kind == "bounce":
            status = await trio.to_thread.run_sync(broker.stop)
            self.log.append(f"broker {broker.broker_id} exited {status} after SIGTERM")
            broker.start()
        else:
            raise ValueError(f"unknown nemesis {kind!r}; known: {', '.join(KINDS)}")

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
            return f"{active.name} cut at byte {at} of {size}"
        if how == "flip":
            spans, _ = disk_faults.batch_spans(active)
            start = spans[-1][0] + 16 if spans else 0  # bytes the CRC protects
            bits = disk_faults.flip_bits(active, start, size, self.rng, count=3)
            return f"{active.name} bits flipped at {bits}"
        if how == "garbage":
            disk_faults.append_garbage(active, self.rng.randrange(1, 200), self.rng)
            return f"{active.name} garbage appended"
        deleted = disk_faults.delete_index_files(partition_dir, ".index")
        return f"{partition_dir.name}: {len(deleted)} .index files deleted"

    def heal(self) -> None:
        """Everything running, unpaused and connected (a cancelled fault may have left one
        down)."""
        if self.lab is not None:
            for broker_id in self.cluster.brokers:
                self.lab.heal(broker_id)
        self.cluster.ensure_running()
