"""LeaderAndIsr (controller -> broker): lead or follow these partitions from this epoch on
(broker.core.controller_requests)."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.controller_requests import apply_leader_and_isr
from controller.zk_client import run_each
from controller.zk_topics import get_topic_config
from protocol.acl import AclOperation
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse

__all__ = ["handle_leader_and_isr"]


async def handle_leader_and_isr(
    ctx: BrokerContext, header: RequestHeader, request: LeaderAndIsrRequest
) -> LeaderAndIsrResponse:
    # Brokers only: on the control-plane listener (KIP-291), with CLUSTER_ACTION.
    if not ctx.on_control_plane() or not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return LeaderAndIsrResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    refused = await ctx.admit_controller_request(
        request.controller_id, request.controller_epoch, request.broker_epoch
    )
    if refused != ErrorCode.NONE:
        return LeaderAndIsrResponse(refused)
    topic_configs: dict[str, dict[str, str]] = {}
    async with ctx.config_lock:  # see broker/config/change_listener.py
        if not ctx.zk.absent:
            topics = {s.topic_name for s in request.partition_states}
            topic_configs, _ = await run_each(ctx.zk, {t: get_topic_config(t) for t in topics})
        outcome = apply_leader_and_isr(
            ctx.state, request, topic_configs, ctx.now_ms(), wall_ms=ctx.wall_ms()
        )
    ctx.apply(outcome.actions)
    return outcome.response
