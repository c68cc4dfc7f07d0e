"""InitProducerId: a new producer id, epoch 0, for an idempotent producer (KIP-98).

Any broker answers (as Kafka's transaction coordinator does for a producer without a
transactional id): every call gets a fresh id, whatever `producer_id`/`producer_epoch` it
carries, so a restarted producer never shares sequence numbers with its earlier self. Errors:
COORDINATOR_NOT_AVAILABLE (retriable) while ZooKeeper cannot be reached to claim a block;
INVALID_REQUEST for a transactional id (Highwater has no transactions).
"""

from __future__ import annotations

import structlog

from broker.context import BrokerContext
from controller.zk_client import ZkError
from controller.zk_data import ZkDataError
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

__all__ = ["handle_init_producer_id"]

_log = structlog.get_logger("highwater.producer_ids")


async def handle_init_producer_id(
    ctx: BrokerContext, header: RequestHeader, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(ErrorCode.INVALID_REQUEST)
    # KIP-679: WRITE on some topic, or IDEMPOTENT_WRITE on the cluster (checked second, so
    # that its denial is logged only when the request is refused).
    if not ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC) and not ctx.authorize_cluster(
        AclOperation.IDEMPOTENT_WRITE
    ):
        return InitProducerIdResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = await ctx.producer_ids.generate_producer_id()
    except (ZkError, ZkDataError) as exc:
        _log.warning("could not claim a producer id block", error=str(exc))
        return InitProducerIdResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(ErrorCode.NONE, producer_id, 0)
