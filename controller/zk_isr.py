"""A partition leader's own ZooKeeper writes: ISR changes, and their notification (Kafka's
ZkAlterPartitionManager; docs/architecture.md, "Replication").

In ZooKeeper-mode Kafka the leader, not the controller, shrinks and expands the ISR: it writes
the partition state znode by compare-and-set on the zkVersion it last knew (the partition
epoch), so a leader that has been replaced, or that raced the controller, fails and waits for
the controller's next LeaderAndIsr. The controller learns of such changes through sequential
`/isr_change_notification/isr_change_<n>` znodes that the broker publishes in batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from controller.zk_data import PartitionStateZnode, ZkDataError, partition_state_path
from controller.zk_script import ZkScript, create, ensure_path, get_data, set_data
from controller.zk_types import BadVersionError, NoNodeError
from protocol.topic_partition import TopicPartition

__all__ = [
    "ISR_CHANGE_NOTIFICATION_PATH",
    "ISR_CHANGE_PREFIX",
    "decode_isr_change_notification",
    "encode_isr_change_notification",
    "publish_isr_changes",
    "write_isr",
]

ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
MAX_PARTITIONS_PER_NOTIFICATION = 10_000


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    items = [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]
    return json.dumps({"version": 1, "partitions": items}, separators=(",", ":")).encode()


def decode_isr_change_notification(data: bytes) -> list[TopicPartition]:
    try:
        obj = json.loads(data.decode("utf-8"))
        items = obj["partitions"]
        if not isinstance(items, list) or len(items) > MAX_PARTITIONS_PER_NOTIFICATION:
            raise ZkDataError("isr change notification: 'partitions' must be a bounded list")
        out = []
        for item in items:
            topic, partition = item["topic"], item["partition"]
            if not isinstance(topic, str) or type(partition) is not int:
                raise ZkDataError("isr change notification: bad topic or partition")
            out.append(TopicPartition(topic, partition))
        return out
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ZkDataError(f"isr change notification: {exc}") from exc


def write_isr(
    tp: TopicPartition, state: PartitionStateZnode, expected_version: int
) -> ZkScript[int | None]:
    """CAS the partition state znode; the new zkVersion, or None if someone else wrote it
    since (the controller, or a newer leader): the caller keeps its ISR and waits for
    LeaderAndIsr."""
    path = partition_state_path(*tp)
    try:
        stat = yield from set_data(path, state.encode(), expected_version)
    except NoNodeError:
        return None
    except BadVersionError:
        # The znode may already hold exactly this state: our own earlier write whose answer
        # was lost (it timed out, the connection dropped). No controller change follows a
        # leader's own ISR write, so waiting for one would retry this CAS forever (Kafka's
        # KAFKA-2729; its fix, ReplicationUtils.checkLeaderAndIsrZkData, adopts the version).
        found = yield from get_data(path)
        if found is None:
            return None
        data, current = found
        try:
            written = PartitionStateZnode.decode(data)
        except ZkDataError:
            return None
        return current.version if written == state else None
    return stat.version


def publish_isr_changes(partitions: Iterable[TopicPartition]) -> ZkScript[str]:
    """Create one sequential notification node for `partitions`; returns its path."""
    data = encode_isr_change_notification(partitions)
    yield from ensure_path(ISR_CHANGE_NOTIFICATION_PATH, makepath=False)
    return (
        yield from create(
            f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}", data, sequence=True
        )
    )
