"""The broker's half of a controlled shutdown (KafkaServer.controlledShutdown), trio shell.

Before a broker stops on SIGTERM it asks the controller to move its leaderships to other ISR
members, so producers and consumers switch over at once instead of waiting for the session
to expire; it keeps serving meanwhile. broker/core/controlled_shutdown.py decides when to ask
and for how long (everything within `controlled.shutdown.timeout.ms`, nothing while the
ZooKeeper session is disconnected). Each attempt reads the controller afresh from ZooKeeper;
an attempt in progress ends when the session disconnects. Partitions the controller cannot
move (no other live ISR member) are logged, not retried: the broker then stops anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

import structlog
import trio

from broker.core.controlled_shutdown import Ask, ShutdownAttempts, Stop, Wait
from broker.services import NotController
from client.clock import now_ms
from client.network import BrokerConnectionError, connect
from controller.zk_controller_election import controller_registration
from controller.zk_data import ZkDataError
from controller.zk_types import SessionEvent, SessionState, ZkError, ZkEvent
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from controller.zk_client import ZkClient

__all__ = ["controlled_shutdown"]


async def controlled_shutdown(ctx: BrokerContext, zk: ZkClient | None) -> bool:
    """True once the controller accepted; False when the broker stops without that (or
    has no ZooKeeper session to find the controller through)."""
    config = ctx.config
    log = structlog.get_logger("highwater.broker")
    if zk is None:
        return False
    started_ms = _clock_ms()
    attempts = ShutdownAttempts.start(
        started_ms,
        max_retries=config.controlled_shutdown_max_retries,
        retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
        request_timeout_ms=config.request_timeout_ms,
        timeout_ms=config.controlled_shutdown_timeout_ms,
    )
    steps = _Steps()
    events = zk.subscribe()  # before the first look at zk.connected: no change goes unseen
    with events:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(steps.cancel_on_disconnect, events)
            stop = await _run(ctx, zk, attempts, steps, log)
            nursery.cancel_scope.cancel()
    elapsed_ms = _clock_ms() - started_ms
    if not stop.accepted:
        log.warning(
            "controlled shutdown failed; stopping anyway"
            if attempts.attempts
            else "controlled shutdown skipped",
            reason=stop.reason.value,
            attempts=attempts.attempts,
            elapsed_ms=elapsed_ms,
        )
    return stop.accepted


class _Steps:
    """The step in progress (an attempt or a wait), cancelled when the ZooKeeper session is
    suspended or lost."""

    def __init__(self) -> None:
        self.current = trio.CancelScope()

    def new(self) -> trio.CancelScope:
        self.current = trio.CancelScope()
        return self.current

    async def cancel_on_disconnect(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        async for event in events:
            if isinstance(event, SessionEvent) and event.state is not SessionState.CONNECTED:
                self.current.cancel()


async def _run(
    ctx: BrokerContext,
    zk: ZkClient,
    attempts: ShutdownAttempts,
    steps: _Steps,
    log: structlog.typing.FilteringBoundLogger,
) -> Stop:
    while True:
        step = attempts.next_step(_clock_ms(), zk_connected=zk.connected)
        match step:
            case Stop():
                return step
            case Wait(delay_ms):
                with steps.new():
                    await trio.sleep(delay_ms / 1000)
            case Ask():
                outcome: _Answer | str = "the ZooKeeper session disconnected"
                with steps.new():
                    outcome = await _attempt(ctx, zk, step)
                if isinstance(outcome, _Answer) and outcome.error_code == ErrorCode.NONE:
                    log.info(
                        "controlled shutdown accepted",
                        controller_id=outcome.controller_id,
                        still_leading=[f"{t}-{p}" for t, p in outcome.remaining],
                        attempt=step.attempt,
                    )
                    attempts.attempt_accepted()
                else:
                    log.warning(
                        "controlled shutdown attempt failed",
                        attempt=step.attempt,
                        error=outcome if isinstance(outcome, str) else outcome.describe(),
                    )
                    attempts.attempt_failed(_clock_ms())
            case _:
                assert_never(step)


@dataclass(frozen=True, slots=True)
class _Answer:
    controller_id: int
    error_code: int
    remaining: list[TopicPartition]  # partitions we still lead

    def describe(self) -> str:
        try:
            name = ErrorCode(self.error_code).name
        except ValueError:
            name = f"error code {self.error_code}"
        return f"{name} from controller {self.controller_id}"


class _NoAnswer(Exception):
    pass


async def _attempt(ctx: BrokerContext, zk: ZkClient, step: Ask) -> _Answer | str:
    """The controller's answer, or why there is none."""
    try:
        with trio.fail_after(step.timeout_ms / 1000):
            return await _ask(ctx, zk, step)
    except trio.TooSlowError:
        return f"no answer within {step.timeout_ms} ms"
    except (BrokerConnectionError, _NoAnswer) as exc:
        return str(exc)
    except (ZkError, ZkDataError) as exc:
        return f"cannot read the controller from ZooKeeper: {exc}"


async def _ask(ctx: BrokerContext, zk: ZkClient, step: Ask) -> _Answer:
    found = await zk.run(controller_registration())
    if found is None:
        raise _NoAnswer("no controller elected")
    controller_id, registration = found
    if controller_id == ctx.broker_id and not isinstance(ctx.controller, NotController):
        code, remaining = await ctx.controller.controlled_shutdown(ctx.broker_id, ctx.broker_epoch)
        return _Answer(controller_id, code, list(remaining))
    if registration is None:
        raise _NoAnswer(f"controller {controller_id} is not registered (it is stopping)")
    host, port = registration.host, registration.port
    for endpoint in registration.endpoints:  # KIP-291: to its control-plane listener, if named
        if endpoint.listener == ctx.config.control_plane_listener_name:
            host, port = endpoint.host, endpoint.port
    connection = await connect(
        host,
        port,
        client_id=f"broker-{ctx.broker_id}-shutdown",
        timeout_ms=step.connect_timeout_ms,
        security=ctx.control_plane_security,
    )
    try:
        response: ControlledShutdownResponse = await connection.request(
            ControlledShutdownRequest(ctx.broker_id, ctx.broker_epoch),
            timeout_ms=step.timeout_ms,
        )
    finally:
        await connection.aclose()
    remaining = [TopicPartition(r.topic, r.partition) for r in response.remaining_partitions]
    return _Answer(controller_id, response.error_code, remaining)


def _clock_ms() -> int:
    """The clients' clock (trio's) in whole ms, as ShutdownAttempts takes it."""
    return round(now_ms())
