"""The operator's config changes among the faults: one key of a topic's configs, or of the
cluster-wide broker defaults, set or deleted through IncrementalAlterConfigs' path
(operator.py). The values stay where the data invariants still mean what they say:
min.insync.replicas never below the simulation's (an ack with a smaller ISR is a violation
there), retention never short enough to delete what was acknowledged (the invariants do not
follow log start offsets), no cleanup.policy or unclean.leader.election.enable changes, and
internal topics (__consumer_offsets) left alone: a segment.bytes below the coordinator's batch
refuses its writes (RECORD_LIST_TOO_LARGE, which the coordinator answers as Kafka's
GroupCoordinatorService does: UNKNOWN_SERVER_ERROR), an operator's mistake, not a fault.
"""

from __future__ import annotations

from controller import zk_data
from controller.zk_configs import BROKERS, TOPICS
from protocol.messages.incremental_alter_configs import AlterableConfig, AlterConfigOpType
from protocol.topic_partition import INTERNAL_TOPICS
from tests.simulation.operator import Operator
from tests.simulation.world import World

__all__ = ["alter_some_configs"]

_WEEK_MS = "604800000"
# topic key -> values; the broker default's key is the setting each topic key falls back to.
_CHOICES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "segment": ("segment.bytes", "log.segment.bytes", ("600", "2048", "1048576")),
    "roll": ("segment.ms", "log.roll.ms", ("300", "5000")),
    "retention time": ("retention.ms", "log.retention.ms", (_WEEK_MS, "-1")),
    "retention size": ("retention.bytes", "log.retention.bytes", ("1073741824", "-1")),
    "flushes": ("flush.messages", "log.flush.interval.messages", ("1", "50")),
}


def alter_some_configs(world: World, operator: Operator) -> str | None:
    """Set or delete one key of a live topic's configs or of the broker defaults; what was
    done, or None if the operator was refused."""
    rng, config = world.rng, world.config
    topics = sorted(
        t
        for t in world.zk.assignments
        if t not in INTERNAL_TOPICS and world.zk.data(zk_data.delete_topic_path(t)) is None
    )
    min_isr = tuple(
        str(n) for n in range(config.min_insync_replicas, config.replication_factor + 1)
    )
    choices = {**_CHOICES, "min.insync": ("min.insync.replicas", "min.insync.replicas", min_isr)}
    topic_key, broker_key, values = choices[rng.choice(sorted(choices))]
    if topics and rng.random() < 0.6:
        entity_type, name, key = TOPICS, rng.choice(topics), topic_key
    else:
        entity_type, name, key = BROKERS, zk_data.DEFAULT_BROKER_ENTITY, broker_key
    value = rng.choice((*values, None))  # None: back to the default
    op = (
        AlterableConfig(key, AlterConfigOpType.DELETE, None)
        if value is None
        else AlterableConfig(key, AlterConfigOpType.SET, value)
    )
    if operator.alter_configs(entity_type, name, [op]) is None:
        return None
    return f"alter configs of {entity_type}/{name}: {key} {'deleted' if value is None else value}"
