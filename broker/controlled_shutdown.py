"""The broker's half of a controlled shutdown (KafkaServer.controlledShutdown).

Before a broker stops on SIGTERM it asks the controller to move its leaderships to other ISR
members, so producers and consumers switch over at once instead of waiting for the session
to expire. The broker keeps serving meanwhile (the controller's LeaderAndIsr turns our
partitions into followers). Failed attempts (no controller known, controller unreachable,
an error answer) are retried `controlled.shutdown.max.retries` times; partitions the
controller cannot move (no other live ISR member: "the last one keeps leading") are logged,
not retried, and the broker then stops anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from client.network import BrokerConnectionError, connect
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["controlled_shutdown"]


async def controlled_shutdown(ctx: BrokerContext) -> bool:
    """True once the controller accepted; False after the retries ran out."""
    config = ctx.config
    log = structlog.get_logger("highwater.broker")
    for attempt in range(1, config.controlled_shutdown_max_retries + 1):
        try:
            with trio.fail_after(config.request_timeout_ms / 1000):
                code, remaining = await _ask_controller(ctx)
        except (BrokerConnectionError, trio.TooSlowError, _NoController) as exc:
            code, remaining, error = ErrorCode.UNKNOWN_SERVER_ERROR, [], str(exc)
        else:
            error = ErrorCode(code).name
        if code == ErrorCode.NONE:
            log.info(
                "controlled shutdown accepted",
                still_leading=[f"{t}-{p}" for t, p in remaining],
                attempt=attempt,
            )
            return True
        log.warning("controlled shutdown attempt failed", attempt=attempt, error=error)
        if attempt < config.controlled_shutdown_max_retries:
            await trio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
    log.warning("controlled shutdown failed; stopping anyway")
    return False


class _NoController(Exception):
    pass


async def _ask_controller(ctx: BrokerContext) -> tuple[int, list[tuple[str, int]]]:
    controller = ctx.controller
    if controller is not None and controller.is_active:
        code, remaining = await controller.controlled_shutdown(ctx.broker_id, ctx.broker_epoch)
        return code, list(remaining)
    controller_id = controller.controller_id if controller is not None else -1
    if controller_id < 0:
        controller_id = ctx.metadata.controller_id
    endpoint = ctx.metadata.brokers.get(controller_id)
    if endpoint is None:
        raise _NoController(f"no controller known (id {controller_id})")
    connection = await connect(
        endpoint.host, endpoint.port, client_id=f"broker-{ctx.broker_id}-shutdown"
    )
    try:
        response: ControlledShutdownResponse = await connection.request(
            ControlledShutdownRequest(ctx.broker_id, ctx.broker_epoch),
            timeout_ms=ctx.config.request_timeout_ms,
        )
    finally:
        await connection.aclose()
    return response.error_code, [(r.topic, r.partition) for r in response.remaining_partitions]
