"""Ctrl-C (SIGINT) and SIGTERM as a clean end of `consume` and `produce`, as kcat's.

`Interrupts.watch` takes the signals for the duration of the command (so no KeyboardInterrupt
is raised inside trio). The first signal cancels every `scope()` open now or later (reading
stdin, waiting for metadata, polling); after `grace_s`, or at a second signal, it runs the
`abort` callback (the producer's bounded close). The command then prints its summary.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import trio

__all__ = ["Interrupts"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    def __init__(self) -> None:
        self.signal: int | None = None  # the first signal received
        self._scopes: set[trio.CancelScope] = set()

    @property
    def interrupted(self) -> bool:
        return self.signal is not None

    @contextmanager
    def scope(self) -> Iterator[trio.CancelScope]:
        """A cancel scope the first signal cancels (at once, if it already came)."""
        with trio.CancelScope() as scope:
            if self.signal is not None:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)

    async def watch(
        self,
        *,
        grace_s: float = 0.0,
        abort: Callable[[], Awaitable[object]] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with trio.open_signal_receiver(*SIGNALS) as signals:
            task_status.started()
            async for signum in signals:
                if self.signal is not None:
                    continue  # already ending
                self.signal = signum
                for scope in list(self._scopes):
                    scope.cancel()
                if abort is not None:
                    with trio.move_on_after(grace_s):
                        async for _ in signals:
                            break  # a second signal: stop waiting
                    await abort()
