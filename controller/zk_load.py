"""What the controller reads from ZooKeeper, as scripts that end in a core event.

`load` reads everything a new controller needs (an `Elected` event); `read_event` turns one
watch notification into the event it stands for (re-reading and re-arming the watch; a
config change notification re-reads the `unclean.leader.election.enable` overrides, Kafka's
TopicUncleanLeaderElectionEnable);
`read_isr_changes` reads the leaders' `/isr_change_notification` nodes (Kafka's
IsrChangeNotificationHandler), `read_log_dir_events` the brokers' log dir failures (Kafka's
LogDirEventNotificationHandler). A malformed config or plan is logged and ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import structlog

from controller import zk_data, zk_topics
from controller.core import (
    BrokersChanged,
    ControllerEvent,
    Elected,
    IsrChanged,
    LiveBroker,
    PartitionState,
    TopicDeletionRequested,
    TopicsChanged,
)
from controller.core.topic_ids import missing_topic_ids
from controller.zk_brokers import live_brokers
from controller.zk_configs import BROKERS, get_entity_config
from controller.zk_controller_election import read_controller_id
from controller.zk_isr import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    decode_isr_change_notification,
)
from controller.zk_script import (
    ZkScript,
    children_or_empty,
    ensure_path,
    get_children,
    get_data,
    get_data_many,
)
from controller.zk_types import NoNodeError, SetOp, WatchEvent, WatchKind
from controller.zk_writes import guarded
from protocol.topic_id import new_topic_id
from protocol.topic_partition import TopicPartition

__all__ = [
    "MAX_ISR_NOTIFICATIONS_PER_ROUND",
    "ResignNeeded",
    "load",
    "read_brokers",
    "read_event",
    "read_isr_changes",
    "read_log_dir_events",
]

MAX_ISR_NOTIFICATIONS_PER_ROUND = 1_000
# Partition states read per pipelined batch (read_partition_states).
STATE_READ_BATCH = 500
_UNCLEAN_CONFIG = "unclean.leader.election.enable"
_log = structlog.get_logger("highwater.controller")


class ResignNeeded(Exception):
    """/controller is no longer ours: stop leading."""


def load(broker_id: int, epoch: int, epoch_zk_version: int) -> ZkScript[Elected]:
    if (yield from read_controller_id(watch=True)) != broker_id:
        raise ResignNeeded
    brokers = yield from read_brokers()
    assignments, topic_ids = yield from _read_topics(epoch_zk_version)
    yield from children_or_empty(zk_data.CONFIG_CHANGES_PATH, watch=True)  # before the reads
    overrides = yield from _read_unclean_overrides(assignments)
    states = yield from read_partition_states(
        TopicPartition(t, p) for t, partitions in assignments.items() for p in partitions
    )
    marked = yield from zk_topics.topics_marked_for_deletion(watch=True)
    plan = yield from _read_reassignment_plan()
    return Elected(
        epoch,
        epoch_zk_version,
        brokers,
        assignments,
        states,
        frozenset(marked),
        unclean_overrides=overrides,
        reassignment_targets=plan.targets,
        reassignment_originals=plan.originals,
        reassignment_throttles=plan.throttles,
        topic_ids=topic_ids,
    )


def _read_topics(
    epoch_zk_version: int | None,
) -> ZkScript[tuple[dict[str, dict[int, tuple[int, ...]]], dict[str, str]]]:
    """Every topic's assignment and id, re-arming the watches. With `epoch_zk_version` (the
    active controller's), topics without an id are given one first (KIP-516's backfill),
    each written only if its znode did not change since it was read."""
    topics = yield from zk_topics.list_topics(watch=True)
    znodes = yield from zk_topics.get_topic_znodes(topics, watch=True)
    ids = {topic: znode.topic_id for topic, (znode, _) in znodes.items()}
    if epoch_zk_version is not None:
        added = missing_topic_ids(ids, new_topic_id)
        if added:
            ops = [
                SetOp(
                    zk_data.topic_path(topic),
                    zk_data.TopicAssignment(znodes[topic][0].partitions, topic_id).encode(),
                    znodes[topic][1],
                )
                for topic, topic_id in added.items()
            ]
            yield from guarded(ops, epoch_zk_version)
            _log.info("topic ids assigned", topics=sorted(added))
            ids.update(added)
    assignments = {topic: dict(znode.partitions) for topic, (znode, _) in znodes.items()}
    return assignments, {topic: i for topic, i in ids.items() if i is not None}


def read_event(
    broker_id: int, event: WatchEvent, epoch_zk_version: int | None = None
) -> ZkScript[ControllerEvent | None]:
    """A watch notification -> the event for the core (re-reading and re-arming). ISR change
    notifications are not handled here (see `read_isr_changes`). `epoch_zk_version`: the
    active controller's, to give new topics without an id one (see `_read_topics`)."""
    if event.kind is WatchKind.RESET:
        return None
    if event.path == zk_data.CONTROLLER_PATH:
        if (yield from read_controller_id(watch=True)) != broker_id:
            raise ResignNeeded
        return None
    if event.path == zk_data.BROKER_IDS_PATH:
        return BrokersChanged((yield from read_brokers()))
    if event.path == zk_data.CONFIG_CHANGES_PATH:
        # A topic's configs or the cluster-wide defaults changed: the overrides are read
        # again (a topic that now allows unclean election elects its leaderless partitions).
        yield from children_or_empty(zk_data.CONFIG_CHANGES_PATH, watch=True)
        assignments, topic_ids = yield from _read_topics(epoch_zk_version)
        overrides = yield from _read_unclean_overrides(assignments)
        return TopicsChanged(assignments, overrides, topic_ids)
    if event.path == zk_data.TOPICS_PATH or _is_topic_path(event.path):
        # A new or deleted topic, or (Kafka's PartitionModificationsHandler) partitions
        # added to one: re-read every assignment, re-arming each topic's data watch.
        assignments, topic_ids = yield from _read_topics(epoch_zk_version)
        overrides = yield from _read_unclean_overrides(assignments)
        return TopicsChanged(assignments, overrides, topic_ids)
    if event.path == zk_data.DELETE_TOPICS_PATH:
        marked = yield from zk_topics.topics_marked_for_deletion(watch=True)
        return TopicDeletionRequested(frozenset(marked))
    return None


def read_isr_changes(
    known: Iterable[TopicPartition],
) -> ZkScript[tuple[IsrChanged, list[str]] | None]:
    """One round: the partitions named by up to MAX_ISR_NOTIFICATIONS_PER_ROUND notification
    nodes (re-arming the watch), their states as read now (only those in `known`), and the
    paths read, to delete once the event is handled. None when there are none."""
    children = yield from _isr_change_children()
    batch = children[:MAX_ISR_NOTIFICATIONS_PER_ROUND]
    if not batch:
        return None
    partitions: set[TopicPartition] = set()
    handled: list[str] = []
    for child in batch:
        path = f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}"
        found = yield from get_data(path)
        if found is None:
            continue
        handled.append(path)
        try:
            partitions.update(decode_isr_change_notification(found[0]))
        except zk_data.ZkDataError as exc:
            _log.warning("malformed ISR change notification", path=path, error=str(exc))
    states = yield from read_partition_states(partitions & set(known))
    return IsrChanged(states), handled


def read_log_dir_events() -> ZkScript[tuple[BrokersChanged, list[str]] | None]:
    """One round of log dir failure notifications (re-arming the watch): every broker's
    registration as read now (a failed broker rewrote its offline partitions there before it
    published), and the notification paths read, to delete once handled. None when none."""
    children = yield from _children_creating(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH)
    batch = [c for c in children if c.startswith(zk_data.LOG_DIR_EVENT_PREFIX)]
    batch = batch[:MAX_ISR_NOTIFICATIONS_PER_ROUND]
    if not batch:
        return None
    handled: list[str] = []
    for child in batch:
        path = f"{zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH}/{child}"
        found = yield from get_data(path)
        if found is None:
            continue
        handled.append(path)
        try:
            broker_id = zk_data.decode_log_dir_event(found[0])
        except zk_data.ZkDataError as exc:
            _log.warning("malformed log dir event notification", path=path, error=str(exc))
            continue
        _log.info("log dir failure notified", broker_id=broker_id, path=path)
    return BrokersChanged((yield from read_brokers())), handled


def read_brokers() -> ZkScript[dict[int, LiveBroker]]:
    registered = yield from live_brokers(watch=True)
    return {
        broker_id: LiveBroker(
            broker_id,
            found.registration.host,
            found.registration.port,
            found.registration.rack,
            found.broker_epoch,
            found.incarnation,
            endpoints=found.registration.endpoints,
            offline_partitions=frozenset(found.registration.offline_partitions),
        )
        for broker_id, found in registered.items()
    }


def read_partition_states(
    partitions: Iterable[TopicPartition],
) -> ZkScript[dict[TopicPartition, PartitionState]]:
    """The state znodes that exist, each with its version as the partition epoch and its
    mzxid (to tell which broker processes started after it was written)."""
    states: dict[TopicPartition, PartitionState] = {}
    wanted = sorted(partitions)
    # Pipelined, a batch at a time: one round trip per batch rather than per partition (the
    # serial reads made a failover with 3,000 partitions wait seconds on them), each batch
    # within one request timeout.
    for start in range(0, len(wanted), STATE_READ_BATCH):
        batch = wanted[start : start + STATE_READ_BATCH]
        answers = yield from get_data_many([zk_data.partition_state_path(*tp) for tp in batch])
        for tp, found in zip(batch, answers, strict=True):
            if found is None:
                continue
            data, stat = found
            znode = zk_data.PartitionStateZnode.decode(data)
            states[TopicPartition(*tp)] = PartitionState(
                znode.leader,
                znode.leader_epoch,
                znode.isr,
                znode.controller_epoch,
                stat.version,
                modified_zxid=stat.mzxid,
            )
    return states


def _read_reassignment_plan() -> ZkScript[zk_data.ReassignmentPlan]:
    """/admin/reassign_partitions (empty if missing; a malformed plan is logged and
    ignored, never a re-load loop)."""
    found = yield from get_data(zk_data.REASSIGN_PARTITIONS_PATH)
    if found is None:
        return zk_data.ReassignmentPlan({})
    try:
        return zk_data.ReassignmentPlan.decode(found[0])
    except zk_data.ZkDataError as exc:
        _log.warning("reassignment plan unreadable; ignored", error=str(exc))
        return zk_data.ReassignmentPlan({})


def _read_unclean_overrides(topics: Iterable[str]) -> ZkScript[dict[str, bool]]:
    """Each topic's unclean.leader.election.enable where it differs from the static broker
    default: its /config/topics/<t> override, else the cluster-wide dynamic default
    (/config/brokers/<default>) if set. A malformed config is logged and ignored (the next
    layer applies), never a re-load loop."""
    dynamic_default: bool | None = None
    try:
        defaults = yield from get_entity_config(BROKERS, zk_data.DEFAULT_BROKER_ENTITY)
        dynamic_default = _unclean_value(defaults.config, "dynamic broker default")
    except zk_data.ZkDataError as exc:
        _log.warning("dynamic broker defaults unreadable", error=str(exc))
    overrides: dict[str, bool] = {}
    for topic in sorted(topics):
        try:
            config = yield from zk_topics.get_topic_config(topic)
        except zk_data.ZkDataError as exc:
            _log.warning("topic config unreadable", topic=topic, error=str(exc))
            config = {}
        value = _unclean_value(config, topic)
        if value is None:
            value = dynamic_default
        if value is not None:
            overrides[topic] = value
    return overrides


def _unclean_value(config: Mapping[str, str], where: str) -> bool | None:
    text = config.get(_UNCLEAN_CONFIG)
    if text is None:
        return None
    # A BOOLEAN as Kafka's ConfigDef.parseType reads one: true or false, any case.
    value = text.strip().lower()
    if value not in ("true", "false"):
        _log.warning("bad config ignored", where=where, key=_UNCLEAN_CONFIG)
        return None
    return value == "true"


def _isr_change_children() -> ZkScript[list[str]]:
    children = yield from _children_creating(ISR_CHANGE_NOTIFICATION_PATH)
    return [c for c in children if c.startswith(ISR_CHANGE_PREFIX)]


def _children_creating(path: str) -> ZkScript[list[str]]:
    """The children of a notification path (watched), creating the path if missing."""
    try:
        children = yield from get_children(path, watch=True)
    except NoNodeError:
        yield from ensure_path(path)
        children = yield from get_children(path, watch=True)
    return children


def _is_topic_path(path: str | None) -> bool:
    """/brokers/topics/<t> itself (its data is the assignment)."""
    prefix = zk_data.TOPICS_PATH + "/"
    return path is not None and path.startswith(prefix) and "/" not in path[len(prefix) :]
