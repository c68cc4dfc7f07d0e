"""The purgatory: requests that wait for something to happen to some partitions.

Kafka parks a delayed fetch (or an acks=all produce) under "watch keys", its partitions, and
completes it when one of them changes or its deadline passes. Here a waiter is a task that
calls `wait(keys, deadline)`; whoever changes a partition calls `notify(key)`. The waiter then
re-checks its condition itself, so a spurious wake-up is harmless.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import trio

__all__ = ["Purgatory"]


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[trio.Event]] = {}
        self._closed = False

    @property
    def watched_keys(self) -> int:
        return len(self._watchers)

    async def wait(self, keys: Iterable[Hashable], deadline: float) -> bool:
        """Park until one of `keys` is notified (True) or `deadline` (trio time) passes (False).

        After `close()` it returns False at once: the caller answers with what it has.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return False
        event = trio.Event()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
            return event.is_set() and not self._closed
        finally:
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(event)
                    if not watchers:
                        del self._watchers[key]

    def close(self) -> None:
        """Shutting down: wake every waiter now and make later waits return at once."""
        self._closed = True
        for key in list(self._watchers):
            self.notify(key)

    def notify(self, key: Hashable) -> None:
        for event in self._watchers.pop(key, ()):
            event.set()
