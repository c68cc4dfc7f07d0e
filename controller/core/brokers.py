"""Brokers joining, leaving, bouncing or re-registering (Kafka's processBrokerChange), and
controlled shutdown (Kafka's doControlledShutdown)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from controller.core.broker_requests import (
    leader_and_isr_effects,
    leader_log,
    stop_replicas,
    update_metadata,
)
from controller.core.effects import (
    ControlledShutdownReply,
    Effect,
    LogEvent,
    WritePartitionStates,
)
from controller.core.events import (
    BrokersChanged,
    ControlledShutdownRequested,
)
from controller.core.leader_choice import (
    LeaderAndIsr,
    elect_controlled_shutdown,
    remove_replicas_from_isr,
)
from controller.core.model import (
    UNKNOWN_BROKER_EPOCH,
    UNKNOWN_ZXID,
    ControllerContext,
    LiveBroker,
    PartitionState,
    online_replicas,
    replicas_of,
)
from controller.core.reconcile import (
    reconcile,
)
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = [
    "bounced_brokers",
    "on_brokers_changed",
    "on_controlled_shutdown",
    "restarted_logs",
    "restarted_members",
    "shutdown_partitions",
]


def bounced_brokers(old: Mapping[int, LiveBroker], new: Mapping[int, LiveBroker]) -> frozenset[int]:
    """Brokers registered in both with a different incarnation: they restarted in between."""
    return frozenset(b for b in old.keys() & new.keys() if old[b].incarnation != new[b].incarnation)


def _offline_changed(
    old: Mapping[int, LiveBroker], new: Mapping[int, LiveBroker], bounced: frozenset[int]
) -> dict[int, frozenset[TopicPartition]]:
    """Brokers (the same process) that reported replicas offline since (KIP-112's log dir
    failure notification): broker id -> the partitions newly offline there."""
    return {
        b: new[b].offline_partitions - old[b].offline_partitions
        for b in sorted(old.keys() & new.keys())
        if b not in bounced and new[b].offline_partitions != old[b].offline_partitions
    }


def _reregistered(old: Mapping[int, LiveBroker], new: Mapping[int, LiveBroker]) -> frozenset[int]:
    """Brokers registered in both, same incarnation, another registration: the same process
    re-registered (its session expired). Its log is intact: no failure."""
    return frozenset(
        b
        for b in old.keys() & new.keys()
        if old[b].incarnation == new[b].incarnation and old[b] != new[b]
    )


def restarted_members(
    live: Mapping[int, LiveBroker], state: PartitionState, bounced: frozenset[int]
) -> frozenset[int]:
    """The live leader and ISR members that restarted unnoticed: their process registered
    first after `state` was written (no controller handled their restart for this
    partition, or it would have written it), or `bounced` (seen with another incarnation
    earlier in our own term). A process that only re-registered after a session expiry
    keeps its incarnation, and its place."""
    members = {state.leader, *state.isr} & live.keys()
    known = state.modified_zxid != UNKNOWN_ZXID
    return frozenset(
        b for b in members if b in bounced or (known and live[b].incarnation > state.modified_zxid)
    )


def restarted_logs(restarted: Mapping[TopicPartition, frozenset[int]]) -> list[Effect]:
    partitions: dict[int, list[TopicPartition]] = {}
    for tp, broker_ids in sorted(restarted.items()):
        for broker_id in broker_ids:
            partitions.setdefault(broker_id, []).append(tp)
    return [
        LogEvent(
            "broker restarted unnoticed",
            {"broker_id": broker_id, "partitions": [f"{t}-{p}" for t, p in tps]},
            level="warning",
        )
        for broker_id, tps in sorted(partitions.items())
    ]


def on_brokers_changed(
    context: ControllerContext, event: BrokersChanged
) -> tuple[ControllerContext, list[Effect]]:
    old, new = context.live_brokers, event.brokers
    bounced = bounced_brokers(old, new)
    reregistered = _reregistered(old, new)
    offline = _offline_changed(old, new, bounced)
    left = sorted(old.keys() - new.keys())
    joined = sorted((new.keys() - old.keys()) | bounced)
    if not left and not joined and not reregistered and not offline:
        return context, []
    effects: list[Effect] = []
    for broker_id, partitions in offline.items():
        effects.append(
            LogEvent(
                "replicas offline (log dir failure)",
                {"broker_id": broker_id, "partitions": [f"{t}-{p}" for t, p in sorted(partitions)]},
                level="warning",
            )
        )
    for broker_id in left:
        effects.append(LogEvent("broker left", {"broker_id": broker_id}))
    for broker_id in sorted(bounced):
        effects.append(
            LogEvent(
                "broker bounced",
                {
                    "broker_id": broker_id,
                    "old_broker_epoch": old[broker_id].epoch,
                    "broker_epoch": new[broker_id].epoch,
                    "old_incarnation": old[broker_id].incarnation,
                    "incarnation": new[broker_id].incarnation,
                },
            )
        )
    for broker_id in sorted(reregistered):
        effects.append(
            LogEvent(
                "broker session renewed",
                {
                    "broker_id": broker_id,
                    "old_broker_epoch": old[broker_id].epoch,
                    "broker_epoch": new[broker_id].epoch,
                    "incarnation": new[broker_id].incarnation,
                },
            )
        )
    for broker_id in joined:
        b = new[broker_id]
        effects.append(
            LogEvent(
                "broker joined",
                {
                    "broker_id": broker_id,
                    "broker_epoch": b.epoch,
                    "incarnation": b.incarnation,
                    "host": b.host,
                    "port": b.port,
                },
            )
        )
    ctx = dataclasses.replace(
        context,
        live_brokers=dict(new),
        shutting_down=context.shutting_down - set(left) - bounced,
    )
    # Kafka's onBrokerFailure(bounced) before its onBrokerStartup(bounced).
    restarted = dict.fromkeys(ctx.partitions(), bounced)
    ctx, writes, changed, created = reconcile(ctx, ctx.partitions(), frozenset(joined), restarted)
    effects += writes
    effects += leader_and_isr_effects(ctx, changed + created, created)
    # A (re)joined broker learns every partition it hosts, changed or not; so does a
    # re-registered one, in requests that carry its new broker epoch.
    for broker_id in sorted({*joined, *reregistered}):
        mine = [tp for tp in ctx.partitions() if broker_id in replicas_of(ctx, tp)]
        effects += leader_and_isr_effects(
            ctx, [tp for tp in mine if tp not in changed and tp not in created], (), {broker_id}
        )
    effects.append(update_metadata(ctx, ()))
    return ctx, effects


def on_controlled_shutdown(
    context: ControllerContext, event: ControlledShutdownRequested
) -> tuple[ControllerContext, list[Effect]]:
    broker_id = event.broker_id
    broker = context.live_brokers.get(broker_id)
    if broker is None:
        return context, [ControlledShutdownReply(broker_id, ErrorCode.BROKER_NOT_AVAILABLE)]
    if event.broker_epoch != UNKNOWN_BROKER_EPOCH and event.broker_epoch < broker.epoch:
        return context, [ControlledShutdownReply(broker_id, ErrorCode.STALE_BROKER_EPOCH)]
    ctx = dataclasses.replace(context, shutting_down=context.shutting_down | {broker_id})
    states = dict(ctx.partition_states)
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    effects: list[Effect] = [
        LogEvent(
            "controlled shutdown requested",
            {"shutting_down_broker_id": broker_id, "broker_epoch": broker.epoch},
        )
    ]
    moved: list[TopicPartition] = []
    left_isr: list[TopicPartition] = []
    followed: list[TopicPartition] = []
    for tp in shutdown_partitions(ctx, broker_id):
        current = states[tp]
        assignment = replicas_of(ctx, tp)
        before = current.leader_and_isr()
        after: LeaderAndIsr | None
        if current.leader == broker_id:
            after = elect_controlled_shutdown(
                before, assignment, online_replicas(ctx, tp), ctx.shutting_down
            )
            target = moved
        else:
            followed.append(tp)
            after = remove_replicas_from_isr(before, [broker_id])
            target = left_isr
        if after is None or after == before:
            continue  # the last one keeps leading (or it was not in the ISR)
        new = PartitionState(
            after.leader,
            after.leader_epoch,
            after.isr,
            ctx.controller_epoch,
            current.partition_epoch + 1,
        )
        states[tp] = new
        updates[tp] = (new.znode(), current.partition_epoch)
        target.append(tp)
        effects.append(leader_log(tp, new))
    ctx = dataclasses.replace(ctx, partition_states=states)
    if updates:
        effects.insert(0, WritePartitionStates(updates))
    effects += leader_and_isr_effects(
        ctx, moved + left_isr, (), excluded={tp: broker_id for tp in left_isr}
    )
    if followed:
        # As Kafka: it stops fetching, so its leaders cannot take it back into the ISR.
        effects.append(stop_replicas(ctx, broker_id, followed))
    if updates:
        effects.append(update_metadata(ctx, ()))
    remaining = tuple(
        tp for tp in ctx.partitions() if tp in states and states[tp].leader == broker_id
    )
    effects.append(ControlledShutdownReply(broker_id, ErrorCode.NONE, remaining))
    return ctx, effects


def shutdown_partitions(context: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """What a controlled shutdown of `broker_id` acts on: the partitions with a state that it
    replicates with others (RF=1 has nowhere to go: it stays, and is reported as remaining).
    The shell reads their states from ZooKeeper first (`LeadingController.serve`)."""
    return [
        tp
        for tp in context.partitions()
        if tp in context.partition_states
        and broker_id in (assignment := replicas_of(context, tp))
        and len(assignment) >= 2
    ]
