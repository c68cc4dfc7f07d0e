"""The nemesis: faults injected at random times while the chaos phase lasts.

- crash a broker (power loss: unflushed data is cut back, maybe with a torn tail);
- restart a crashed broker (log recovery, then registration once its old session expired);
- bounce a broker: kill it and restart it at once (a killed process loses no data);
- cut a broker off from its peers (it still talks to ZooKeeper), or heal the network;
- expire a live broker's ZooKeeper session (it re-registers: a "bounce" without data loss);
- a power outage: every live broker crashes at once (only with
  `power_loss_restart_waits_for_controller` off: with no broker left there is no controller
  to wait for);
- fill a broker's disk (its writes fail with ENOSPC, part of the batch written: the broker
  takes the log dir offline), and later free it and restart the broker (`free_disk`);
- with `dynamic_configs`: alter a topic's configs or the cluster-wide broker defaults
  (dynamic_configs.py).
Time itself is the other fault: the clock runs on while followers are cut off, so ISRs
shrink (replica.lag.time.max.ms) and changes are propagated (the damping intervals).
"""

from __future__ import annotations

from typing import Literal

from protocol.messages.elect_leaders import ElectionType
from tests.simulation.dynamic_configs import alter_some_configs
from tests.simulation.operator import Operator
from tests.simulation.world import World

__all__ = ["Nemesis", "crash_broker", "free_disk", "may_restart", "restart_broker"]


def crash_broker(
    world: World,
    broker_id: int,
    keep: Literal["random", "all", "flushed"] = "random",
    torn: bool | None = None,
) -> str:
    cuts = world.brokers[broker_id].crash(keep, torn)
    lost = ", ".join(
        f"{t}-{p}: LEO {c.log_end_offset} -> {c.kept_offset}"
        + (f" +{c.torn_bytes} torn bytes" if c.torn_bytes else "")
        + f" (recovery point {c.recovery_point})"
        for (t, p), c in cuts.items()
    )
    return f"crash b{broker_id} [{lost}]"


def may_restart(world: World, broker_id: int) -> bool:
    """See SimConfig.power_loss_restart_waits_for_controller."""
    broker = world.brokers[broker_id]
    if broker.alive:
        return False
    if (
        not broker.lost_data_in_last_crash
        or not world.config.power_loss_restart_waits_for_controller
    ):
        return True
    return any(
        b.alive
        and b.controller is not None
        and b.controller.active
        and b.controller.context.active  # loaded: its view was reconciled with ZooKeeper
        and broker_id not in b.controller.context.live_brokers
        for b in world.brokers.values()
    )


def restart_broker(world: World, broker_id: int) -> str:
    world.brokers[broker_id].start()
    return f"restart b{broker_id}"


def free_disk(world: World, broker_id: int) -> str:
    """An operator frees space on a full disk; a running broker with offline logs must be
    restarted to bring them back (Kafka's offline dirs stay offline until then)."""
    broker = world.brokers[broker_id]
    broker.free_disk()
    if broker.alive and broker.offline_since:
        return (
            f"free the disk of b{broker_id}; {crash_broker(world, broker_id, 'all', False)}; "
            + (restart_broker(world, broker_id))
        )
    return f"free the disk of b{broker_id}"


class Nemesis:
    def __init__(self, world: World, operator: Operator) -> None:
        self.world = world
        self.operator = operator
        self.running = False
        self.actions: list[str] = []
        self._topics_created = 0

    def start(self) -> None:
        self.running = True
        self._schedule()

    def _schedule(self) -> None:
        if self.running:
            delay_ms = self.world.draw(self.world.config.nemesis_interval_ms)
            self.world.scheduler.after(delay_ms, "nemesis acts", self._act)

    def _act(self) -> None:
        if not self.running:
            return
        action = self._choose()
        if action is not None:
            self.actions.append(action)
            self.world.trace(f"NEMESIS: {action}")
        self._schedule()

    def _choose(self) -> str | None:
        world = self.world
        rng = world.rng
        brokers = world.brokers
        up = sorted(b for b, broker in brokers.items() if broker.alive)
        down = sorted(b for b, broker in brokers.items() if not broker.alive)
        restartable = [b for b in down if may_restart(world, b)]
        cut = world.net.cut
        options: list[tuple[str, int]] = [("wait", 3)]
        if restartable:
            options.append(("restart", 4))
        if up and len(down) < world.config.max_crashed_brokers:
            options.append(("crash", 3))
            options.append(("bounce", 2))
        if up and not cut:
            options.append(("isolate", 2))
        if cut:
            options.append(("heal", 3))
        if up:
            options.append(("expire session", 1))
        if up and not world.config.power_loss_restart_waits_for_controller:
            options.append(("power outage", 1))
        full = sorted(b for b, broker in brokers.items() if broker.disk.full)
        if world.config.enable_disk_faults and up and len(full) < world.config.max_crashed_brokers:
            options.append(("fill disk", 1))
        if full:
            options.append(("free disk", 2))
        if world.config.enable_operator:
            options += [("reassign", 3), ("elect", 2), ("create topic", 1), ("delete topic", 1)]
            if up and len(down) < world.config.max_crashed_brokers:
                options.append(("controlled shutdown", 2))
        if world.config.dynamic_configs:
            options.append(("alter configs", 4))
        kinds, weights = zip(*options, strict=True)
        kind = rng.choices(kinds, weights)[0]
        if kind in ("reassign", "elect", "create topic", "delete topic", "controlled shutdown"):
            return self._operate(kind, up)
        if kind == "alter configs":
            return alter_some_configs(world, self.operator)
        if kind == "restart":
            return restart_broker(world, rng.choice(restartable))
        if kind == "crash":
            return crash_broker(world, rng.choice(up))
        if kind == "bounce":  # kill -9 and restart: the page cache (all data) survives
            victim = rng.choice(up)
            return f"{crash_broker(world, victim, keep='all', torn=False)}; " + restart_broker(
                world, victim
            )
        if kind == "isolate":
            victim = rng.choice(up)
            cut.add(victim)
            return f"cut b{victim} off from its peers"
        if kind == "heal":
            cut.clear()
            return "heal the network"
        if kind == "power outage":  # every live broker at once: KIP-101 scenario 2 at scale
            return "power outage: " + "; ".join(crash_broker(world, b) for b in up)
        if kind == "fill disk":
            victim = rng.choice([b for b in up if b not in full] or up)
            brokers[victim].fill_disk()
            return f"fill the disk of b{victim}"
        if kind == "free disk":
            return free_disk(world, rng.choice(full))
        if kind == "expire session":
            victim = rng.choice(up)
            world.brokers[victim].expire_session()
            return f"expire the zookeeper session of b{victim}"
        return None

    def _operate(self, kind: str, up: list[int]) -> str | None:
        """An operator's action (operator.py), at a random moment among the faults."""
        world, rng, operator = self.world, self.world.rng, self.operator
        tps = sorted(world.zk.states)
        brokers = sorted(world.brokers)
        rf = world.config.replication_factor
        if kind == "reassign" and tps:
            tp = rng.choice(tps)
            target = None if rng.random() < 0.1 else tuple(rng.sample(brokers, rf))
            if operator.reassign(tp, target):
                return (
                    f"reassign {tp} to {target}" if target else f"cancel the reassignment of {tp}"
                )
        elif kind == "elect" and tps:
            # An operator elects where it helps: leaderless partitions (unclean), or those
            # whose leader is not the preferred replica.
            states, assignments = world.zk.states, world.zk.assignments
            offline = [tp for tp in tps if states[tp][0].leader < 0]
            election = ElectionType.UNCLEAN if offline else ElectionType.PREFERRED
            if election == ElectionType.PREFERRED:
                offline = [tp for tp in tps if states[tp][0].leader != assignments[tp[0]][tp[1]][0]]
            chosen = None if rng.random() < 0.3 or not offline else (rng.choice(offline),)
            if operator.elect(election, chosen):
                return f"elect {election.name.lower()} leaders for {chosen or 'every partition'}"
        elif kind == "create topic":
            self._topics_created += 1
            topic = f"new{self._topics_created}"
            assignment = {p: tuple(rng.sample(brokers, rf)) for p in range(rng.randint(1, 2))}
            if operator.create_topic(topic, assignment):
                return f"create topic {topic} {assignment}"
        elif kind == "delete topic":
            created = [t for t in world.zk.assignments if t.startswith("new")]
            if created:
                topic = rng.choice(created)
                if operator.delete_topic(topic):
                    return f"delete topic {topic}"
        elif kind == "controlled shutdown":
            victim = rng.choice(up)
            world.brokers[victim].shut_down()
            return f"controlled shutdown of b{victim}"
        return None
