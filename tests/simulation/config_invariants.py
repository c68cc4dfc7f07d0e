"""What must hold of dynamic config changes (checked after every step): every live broker
with a ZooKeeper session has, within `CONVERGENCE_MS` of a change, what ZooKeeper stores
applied to each of its open logs (Kafka's DynamicConfigManager: a change reaches every
broker): the log's config is its topic's overrides over the cluster-wide dynamic defaults
over the static ones, its partition's min.insync.replicas the topic's override, and new logs
and the broker's min.insync.replicas take the defaults. The data invariants (invariants.py)
hold meanwhile: acknowledged records are never lost while segments, flushes and
min.insync.replicas change under them.
"""

from __future__ import annotations

from collections import Counter

from broker.config.dynamic_update import partition_config, with_dynamic_defaults
from controller import zk_data
from controller.zk_configs import BROKERS, TOPICS, get_entity_config
from protocol.topic_partition import TopicPartition
from tests.simulation.invariants import InvariantViolation
from tests.simulation.world import World

__all__ = ["CONVERGENCE_MS", "ConfigInvariants"]

# A watch reaches the broker within the ZooKeeper latency, a lost session is replaced as
# fast, and each round reads synchronously: far less than this.
CONVERGENCE_MS = 100


class ConfigInvariants:
    def __init__(self, world: World, session: int) -> None:
        self.world = world
        self.session = session  # an operator's, to read what is stored
        # (broker, its session, log or None for the broker's own defaults) -> first seen
        # differing from what is stored.
        self._differing_since: dict[tuple[int, int, TopicPartition | None], int] = {}
        self.counts: Counter[str] = Counter()

    def check(self) -> None:
        world = self.world
        zk = world.zk
        stored = zk.run(self.session, get_entity_config(BROKERS, zk_data.DEFAULT_BROKER_ENTITY))
        defaults, skipped = with_dynamic_defaults(world.static_defaults, stored.config)
        assert not skipped, skipped
        overrides: dict[str, dict[str, str]] = {}
        differing: dict[tuple[int, int, TopicPartition | None], str] = {}
        for broker_id, broker in sorted(world.brokers.items()):
            state, session = broker.state, broker.session_id
            if not broker.alive or state is None or session is None:
                continue
            log_manager = state.replica_manager.log_manager
            if (log_manager.default_config, state.min_insync_replicas) != (
                defaults.log_config,
                defaults.min_insync_replicas,
            ):
                differing[(broker_id, session, None)] = "its defaults for new logs"
            for tp, log in sorted(broker.logs.items()):
                if tp in broker.offline_since:
                    continue
                if tp.topic not in overrides:
                    found = zk.run(self.session, get_entity_config(TOPICS, tp.topic))
                    overrides[tp.topic] = dict(found.config)
                wanted = partition_config(defaults.log_config, overrides[tp.topic])
                partition = broker.partitions.get(tp)
                if log.config != wanted.log_config or (
                    partition is not None
                    and partition.min_insync_replicas != wanted.min_insync_replicas
                ):
                    differing[(broker_id, session, tp)] = f"{tp.topic}-{tp.partition}"
        now_ms = world.now_ms
        since = {key: self._differing_since.get(key, now_ms) for key in differing}
        for broker_id, session, _ in self._differing_since.keys() - since.keys():
            broker = world.brokers[broker_id]
            if broker.alive and broker.session_id == session:  # not gone with its session
                self.counts["converged after a change"] += 1
        self._differing_since = since
        self.counts["checks"] += 1
        for key, first_ms in sorted(since.items(), key=lambda kv: kv[1]):
            if now_ms - first_ms > CONVERGENCE_MS:
                broker_id = key[0]
                raise InvariantViolation(
                    f"b{broker_id}: {differing[key]} differs from the stored configs for "
                    f"{now_ms - first_ms} ms (defaults {dict(stored.config)}, topic overrides "
                    f"{overrides.get(key[2].topic, {}) if key[2] else {}})"
                )
