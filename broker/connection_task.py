"""One connection's trio task, the shell of its state machine (broker.core.connection): it
reads what the machine asks for, runs the handler or the SASL step it hands over, writes the
answers and waits until the times it gives. A plain-TCP connection is read and written
through client.socket_io.LeanSocket, a TLS one through trio's SSLStream. A handler that fails,
or a response that cannot be encoded, closes the connection (logged with its traceback); a
response not taken within 30 s + 1 s per MiB raises trio.TooSlowError to the server.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import structlog
import trio

from broker.client_quotas import with_throttle_time
from broker.context import SESSION, BrokerContext
from broker.core.connection import (
    AnswerApiVersions,
    CheckPassword,
    Close,
    Handle,
    Muted,
    NeedData,
    SaslReply,
    SendRefusal,
    ServerConnection,
)
from broker.handlers import HANDLERS
from broker.kafka.wire import Wire
from broker.purgatory import RequestClock, current_request_clock
from broker.request_stats import RequestStats
from client.socket_io import LeanSocket
from controller.zk_types import ZkConnectionError
from protocol.apis import ApiKey
from protocol.framing import frame

__all__ = ["DIRECT_REQUEST_MAX_BYTES", "Channel", "Connection", "ConnectionTasks", "send"]

# Requests up to this size (Kafka's max.request.size default) are read in place.
DIRECT_REQUEST_MAX_BYTES = 1024 * 1024

# A connection's byte stream: the plain socket itself, or TLS over it.
Channel = LeanSocket | trio.SSLStream[trio.SocketStream]


@dataclass(eq=False)
class Connection:
    peer: str
    listener: str
    host: str
    machine: ServerConnection  # its state and decisions (broker.core.connection)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    waiting_since: float = math.inf  # trio time it began waiting for a request (idle clock)


class ConnectionTasks:
    """What every connection's task shares: the broker, the password-check threads, the
    per-API figures (None: not recorded) and the time connections were muted for client
    quotas (KIP-219)."""

    def __init__(
        self,
        ctx: BrokerContext,
        request_stats: RequestStats | None,
        password_checks: trio.CapacityLimiter,
    ) -> None:
        self.ctx = ctx
        self.request_stats = request_stats
        self.password_checks = password_checks
        self.throttled_s = 0.0
        self.stopping = False  # the broker stops: no request after the one in hand

    async def serve(
        self,
        stream: Channel,
        conn: Connection,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        """Serve requests until the client goes, the broker stops or the connection's state
        machine (broker.core.connection) closes it: read what it needs, run what it hands
        over, write the answers, wait until the times it gives."""
        machine = conn.machine
        clock = RequestClock()
        # This task's context: the purgatory adds to it (the metrics, request_percentage).
        current_request_clock.set(clock)
        lean = stream if isinstance(stream, LeanSocket) else None
        waits = -1  # the LeanSocket's waits at the last request
        # The control-plane listener's requests (the controller's, brokers') take no quota.
        exempt = conn.listener == self.ctx.config.control_plane_listener_name
        while not self.stopping:
            received = time.perf_counter()
            event = machine.next_event(trio.current_time())
            if isinstance(event, Close):
                if event.message is not None:
                    getattr(log, event.level)(event.message, **event.fields)
                return
            if isinstance(event, NeedData):
                if not await self._receive(stream, conn, event, log):
                    return
                continue
            if isinstance(event, Muted):
                await trio.sleep_until(event.until_s)
                continue
            if lean is not None:
                if lean.waits == waits:
                    # No wait since the last request (a client pipelining): let others run.
                    await trio.lowlevel.checkpoint()
                waits = lean.waits
            if isinstance(event, SendRefusal):
                await send(stream, [event.frame])
            elif isinstance(event, AnswerApiVersions):
                call = event.call
                response = await HANDLERS[ApiKey.API_VERSIONS](self.ctx, call.header, call.body)
                await send(stream, machine.wire.encode(call, response))
            elif isinstance(event, CheckPassword):
                matches = None
                with trio.move_on_at(event.deadline_s):
                    check = event.check.run
                    matches = await trio.to_thread.run_sync(check, limiter=self.password_checks)
                machine.password_checked(matches, trio.current_time())
            elif isinstance(event, SaslReply):
                log = await self._sasl_reply(stream, machine.wire, event, log)
            else:
                if not await self._handle(stream, machine, event, log, clock, exempt, received):
                    return

    async def _receive(
        self,
        stream: Channel,
        conn: Connection,
        need: NeedData,
        log: structlog.typing.FilteringBoundLogger,
    ) -> bool:
        """Read more of the stream into the connection's decoder; False: the client went, or
        the authentication deadline passed (logged)."""
        machine = conn.machine
        if need.deadline_s is not None:
            with trio.move_on_at(need.deadline_s) as idle:
                data = await stream.receive_some(need.receive_bytes)
            if idle.cancelled_caught:
                close = machine.deadline_passed()
                getattr(log, close.level)(close.message, **close.fields)
                return False
            machine.receive_data(data)
            return bool(data)
        conn.waiting_since = trio.current_time()  # _close_idle_connections
        if isinstance(stream, LeanSocket):
            # A request up to DIRECT_REQUEST_MAX_BYTES (a Produce of several batches) is read
            # straight into its own buffer; a longer one as it arrives, so a length alone sets
            # aside no more than that.
            count = await stream.receive_frames(
                machine.decoder, need.receive_bytes, DIRECT_REQUEST_MAX_BYTES
            )
        else:
            data = await stream.receive_some(need.receive_bytes)
            machine.receive_data(data)
            count = len(data)
        conn.waiting_since = math.inf
        return bool(count)

    async def _handle(
        self,
        stream: Channel,
        machine: ServerConnection,
        event: Handle,
        log: structlog.typing.FilteringBoundLogger,
        clock: RequestClock,
        exempt: bool,
        received: float,
    ) -> bool:
        """Run one request's handler, charge its client's quotas (KIP-219) and send the
        response; False: close the connection (a failing handler, logged)."""
        request, header = event.call, event.call.header
        handler = HANDLERS[header.api_key]
        log.debug("request", api_key=header.api_key, correlation_id=header.correlation_id)
        clock.remote_s = 0.0
        started = time.perf_counter()
        try:
            response = await handler(self.ctx, header, request.body)
        except ZkConnectionError as exc:
            # An expected condition, not a bug: ZooKeeper is away (a session being
            # re-established, or the ensemble stopping). The peer retries on a new
            # connection (the controller's requests, every client's).
            log.warning(
                "request needs ZooKeeper, which did not answer; connection closed",
                api_key=header.api_key,
                error=str(exc),
            )
            return False
        except Exception:
            log.exception("request handler failed", api_key=header.api_key)
            return False
        handled = time.perf_counter()
        throttle_ms = 0
        if not exempt:
            throttle_ms = self.ctx.client_quotas.charge(
                SESSION.get().principal,
                header.client_id,
                header.api_key,
                request.body,
                response,
                handled - started - clock.remote_s,  # less its waits in the purgatory
                self.ctx.now_ms(),
            )
            response = with_throttle_time(response, throttle_ms)
        size = 0
        if response is not None:
            try:
                parts = machine.wire.encode(request, response)
            except Exception:
                # A bug in that handler, which must not take the broker down.
                log.exception("response could not be encoded", api_key=header.api_key)
                return False
            size = await send(stream, parts)
        machine.handled(throttle_ms, trio.current_time())
        if self.request_stats is not None:
            remote_s = clock.remote_s
            self.request_stats.record(
                header.api_key,
                started - received,
                handled - started - remote_s,
                remote_s,
                time.perf_counter() - handled,
                event.frame_bytes,
                size,
                response,
            )
        if throttle_ms > 0:
            self.throttled_s += throttle_ms / 1000
        return True

    async def _sasl_reply(
        self,
        stream: Channel,
        wire: Wire,
        reply: SaslReply,
        log: structlog.typing.FilteringBoundLogger,
    ) -> structlog.typing.FilteringBoundLogger:
        """Send a SASL step's answer (a failure's after connection.failed.authentication.delay.ms:
        Kafka's delayed close, so a guesser gets one answer per delay per connection); the
        connection's logger, bound to the principal once authenticated."""
        if reply.delay_s > 0:
            await trio.sleep(reply.delay_s)
        if not reply.raw:
            await send(stream, wire.encode(reply.call, reply.response))
        elif not reply.close:  # a raw token's answer: the server's token alone
            await send(stream, [frame(bytes(reply.response.auth_bytes))])
        if reply.principal is None:
            return log
        SESSION.set(dataclasses.replace(SESSION.get(), principal=reply.principal))
        structlog.contextvars.bind_contextvars(principal=str(reply.principal))
        log.info(
            "re-authenticated" if reply.reauthenticated else "authenticated",
            principal=str(reply.principal),
            mechanism=reply.mechanism,
        )
        return log if reply.close else log.bind(principal=str(reply.principal))


async def send(stream: Channel, parts: list[bytes]) -> int:
    """Write a response's frame, given in pieces (`encode_response_parts`); its size."""
    size = sum(map(len, parts))
    if isinstance(stream, LeanSocket):
        await stream.send_parts(parts, _send_timeout_s(size))
    else:
        with trio.fail_after(_send_timeout_s(size)):
            await stream.send_all(parts[0] if len(parts) == 1 else b"".join(parts))
    return size


def _send_timeout_s(size: int) -> float:
    # A bounded wait for slow readers: 30 s plus 1 s per MiB.
    return 30.0 + size / (1024 * 1024) if size >= 0 else math.inf
