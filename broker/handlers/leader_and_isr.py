"""LeaderAndIsr (controller -> broker): lead or follow these partitions from this epoch on."""

from __future__ import annotations

from broker.context import METADATA_KEY, BrokerContext
from controller.zk_topics import get_topic_config
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_leader_and_isr"]


async def handle_leader_and_isr(
    ctx: BrokerContext, header: RequestHeader, request: LeaderAndIsrRequest
) -> LeaderAndIsrResponse:
    refused = await ctx.admit_controller_request(request.controller_epoch, request.broker_epoch)
    if refused != ErrorCode.NONE:
        return LeaderAndIsrResponse(refused)
    topic_configs = {}
    if ctx.zk is not None:
        for topic in {s.topic_name for s in request.partition_states}:
            topic_configs[topic] = await get_topic_config(ctx.zk, topic)
    results = ctx.replica_manager.become_leader_or_follower(
        request.partition_states, ctx.now_ms(), topic_configs
    )
    _update_fetchers(ctx, request, results)
    for topic, partition, _ in results:
        # Waiting fetches and produces re-check leadership.
        ctx.purgatory.notify(TopicPartition(topic, partition))
    ctx.purgatory.notify(METADATA_KEY)
    return LeaderAndIsrResponse(
        ErrorCode.NONE,
        tuple(LeaderAndIsrPartitionError(t, p, code) for t, p, code in results),
    )


def _update_fetchers(
    ctx: BrokerContext, request: LeaderAndIsrRequest, results: list[tuple[str, int, int]]
) -> None:
    """Followers fetch from their leader (truncating first); leaders and partitions without
    a live leader fetch from no one."""
    if ctx.fetchers is None:
        return
    leaders: dict[int, BrokerEndpoint] = dict(ctx.metadata.brokers)
    leaders.update({b.node_id: b for b in request.live_leaders})
    for topic, index, code in results:
        partition = ctx.replica_manager.partitions.get(TopicPartition(topic, index))
        if code != ErrorCode.NONE or partition is None:
            continue
        leader = leaders.get(partition.leader_id)
        if partition.is_leader or leader is None:
            ctx.fetchers.unfollow(TopicPartition(topic, index))
        else:
            ctx.fetchers.follow(TopicPartition(topic, index), leader, partition.leader_epoch)
