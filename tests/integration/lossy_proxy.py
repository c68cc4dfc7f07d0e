"""A TCP proxy that loses answers: KIP-98's lost acknowledgement, on demand.

Connections accepted while the proxy is armed forward the client's bytes to the broker as
they come; after forwarding a chunk, with probability `drop_probability` (a seeded RNG), the
proxy stops passing the broker's answer back and closes the connection a moment later. The
request was delivered, the broker acted on it, the client never hears back: it retries, and
only an idempotent producer's retry is not written twice. By default connections accepted
before arming (a controller's own channel through an advertised address) are never touched;
with `arm_existing` every connection is lossy while the proxy is armed.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field

import trio

__all__ = ["LossyProxy"]

_CLOSE_AFTER_S = 0.05  # long enough for the broker to read the request and act on it


@dataclass
class LossyProxy:
    target_port: int
    drop_probability: float
    seed: int
    armed: bool = False
    arm_existing: bool = False
    drops: int = 0
    listen_host: str = "127.0.0.1"
    target_host: str = "127.0.0.1"  # a broker in a network namespace: its own address
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def serve(
        self, port: int, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        listeners = await trio.open_tcp_listeners(port, host=self.listen_host)
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        accepted_armed = self.armed
        lost = trio.Event()  # set once this connection's answers are being thrown away
        try:
            async with (
                client,
                await trio.open_tcp_stream(self.target_host, self.target_port) as server,
                trio.open_nursery() as nursery,
            ):

                async def upstream() -> None:
                    while data := await client.receive_some():
                        await server.send_all(data)
                        lossy = self.armed and (accepted_armed or self.arm_existing)
                        if lossy and self._rng.random() < self.drop_probability:
                            self.drops += 1
                            lost.set()
                            await trio.sleep(_CLOSE_AFTER_S)
                            nursery.cancel_scope.cancel()
                            return
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await server.send_eof()

                async def downstream() -> None:
                    while data := await server.receive_some():
                        if lost.is_set():
                            continue
                        await client.send_all(data)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(upstream)
                nursery.start_soon(downstream)
        except* (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # either side went away: this connection is over
