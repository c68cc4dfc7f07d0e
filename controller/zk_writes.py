"""The controller's ZooKeeper writes, as scripts: one per kind of write effect.

Every write is a transaction that starts with a check of `/controller_epoch`'s zkVersion, so a
controller that has been replaced cannot write anything (Kafka's controller epoch zkVersion
guard): that check failing raises `ControllerMovedError`. Any other failed write (a CAS lost
against a partition state, a vanished node) raises `ReloadNeeded`: re-read everything.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from controller import zk_data
from controller.core import (
    CreatePartitionStates,
    DeleteTopicZnodes,
    WritePartitionStates,
    WriteReassignmentPlan,
    WriteTopicAssignment,
)
from controller.zk_script import ZkScript, ensure_path, exists, get_children, get_data, multi
from controller.zk_types import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    TransactionOp,
)

__all__ = [
    "ControllerMovedError",
    "ReloadNeeded",
    "WriteEffect",
    "delete_paths",
    "guarded",
    "write",
]

MAX_OPS_PER_TRANSACTION = 200
WriteEffect = (
    CreatePartitionStates
    | WritePartitionStates
    | WriteTopicAssignment
    | WriteReassignmentPlan
    | DeleteTopicZnodes
)
_log = structlog.get_logger("highwater.controller")


class ControllerMovedError(Exception):
    """Our controller epoch is no longer current: another broker is controller."""


class ReloadNeeded(Exception):
    """A write lost a race: re-read everything from ZooKeeper."""


def write(effect: WriteEffect, epoch_zk_version: int) -> ZkScript[None]:
    match effect:
        case CreatePartitionStates(states):
            # Parents first, unguarded (empty nodes, harmless); the state nodes themselves
            # are created under the controller epoch guard.
            for topic in sorted({t for t, _ in states}):
                yield from ensure_path(zk_data.partitions_path(topic), makepath=False)
            for topic, partition in sorted(states):
                yield from ensure_path(zk_data.partition_path(topic, partition), makepath=False)
            ops: list[TransactionOp] = [
                CreateOp(zk_data.partition_state_path(t, p), znode.encode())
                for (t, p), znode in sorted(states.items())
            ]
            yield from guarded(ops, epoch_zk_version)
        case WritePartitionStates(updates):
            ops = [
                SetOp(zk_data.partition_state_path(t, p), znode.encode(), expected)
                for (t, p), (znode, expected) in sorted(updates.items())
            ]
            yield from guarded(ops, epoch_zk_version)
        case WriteTopicAssignment():
            yield from _write_topic_assignment(effect, epoch_zk_version)
        case WriteReassignmentPlan():
            yield from _write_reassignment_plan(effect, epoch_zk_version)
        case DeleteTopicZnodes(topic):
            paths = yield from _subtree_bottom_up(zk_data.topic_path(topic))
            for path in (zk_data.topic_config_path(topic), zk_data.delete_topic_path(topic)):
                if (yield from exists(path)) is not None:
                    paths.append(path)
            yield from delete_paths(paths, epoch_zk_version)


def guarded(ops: Sequence[TransactionOp], epoch_zk_version: int) -> ZkScript[None]:
    """Write `ops` in transactions that each first check /controller_epoch's zkVersion."""
    guard = CheckOp(zk_data.CONTROLLER_EPOCH_PATH, epoch_zk_version)
    for start in range(0, len(ops), MAX_OPS_PER_TRANSACTION):
        chunk = ops[start : start + MAX_OPS_PER_TRANSACTION]
        try:
            yield from multi([guard, *chunk])
        except (BadVersionError, NoNodeError, NodeExistsError) as exc:
            if exc.op_index == 0:
                raise ControllerMovedError(str(exc)) from exc
            _log.warning("controller write lost a race; reloading", error=repr(exc))
            raise ReloadNeeded from exc


def delete_paths(paths: Sequence[str], epoch_zk_version: int) -> ZkScript[None]:
    yield from guarded([DeleteOp(path) for path in paths], epoch_zk_version)


def _write_topic_assignment(effect: WriteTopicAssignment, epoch_zk_version: int) -> ZkScript[None]:
    """CAS on the topic znode: written only if it still holds what the core expected
    (otherwise someone changed it meanwhile: re-load)."""
    path = zk_data.topic_path(effect.topic)
    found = yield from get_data(path)
    current = None if found is None else zk_data.TopicAssignment.decode(found[0])
    if found is None or current is None or dict(current.partitions) != dict(effect.expected):
        _log.warning("topic assignment changed meanwhile; reloading", topic=effect.topic)
        raise ReloadNeeded
    data = zk_data.TopicAssignment(dict(effect.assignment), current.topic_id).encode()
    yield from guarded([SetOp(path, data, found[1].version)], epoch_zk_version)


def _write_reassignment_plan(
    effect: WriteReassignmentPlan, epoch_zk_version: int
) -> ZkScript[None]:
    path = zk_data.REASSIGN_PARTITIONS_PATH
    present = (yield from exists(path)) is not None
    if not effect.reassignments:
        if present:
            yield from delete_paths([path], epoch_zk_version)
        return
    plan = zk_data.ReassignmentPlan(
        {tp: r.target for tp, r in effect.reassignments.items()},
        {tp: r.original for tp, r in effect.reassignments.items()},
        {tp: r.throttle_bytes_per_sec for tp, r in effect.reassignments.items()},
    ).encode()
    op: TransactionOp = SetOp(path, plan) if present else CreateOp(path, plan)
    yield from guarded([op], epoch_zk_version)


def _subtree_bottom_up(root: str) -> ZkScript[list[str]]:
    """`root` and all its descendants, children before parents; [] if `root` is missing."""
    if (yield from exists(root)) is None:
        return []
    out: list[str] = []
    pending = [(root, False)]
    while pending:
        path, expanded = pending.pop()
        if expanded:
            out.append(path)
            continue
        try:
            children = yield from get_children(path)
        except NoNodeError:
            continue
        pending.append((path, True))
        pending.extend((f"{path}/{child}", False) for child in reversed(children))
    return out
