"""Admin requests that change topics answer once every partition has a leader (or time out)."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from broker.context import METADATA_KEY, BrokerContext

__all__ = ["MAX_ADMIN_TIMEOUT_MS", "admin_deadline", "wait_for_leaders"]

MAX_ADMIN_TIMEOUT_MS = 5 * 60 * 1000


def admin_deadline(timeout_ms: int) -> float:
    """The trio deadline for a request's `timeout_ms`, clamped to [0, 5 min]."""
    return trio.current_time() + min(max(timeout_ms, 0), MAX_ADMIN_TIMEOUT_MS) / 1000


async def wait_for_leaders(
    ctx: BrokerContext, partition_counts: Mapping[str, int], deadline: float
) -> set[str]:
    """Wait until this broker's metadata shows each topic with at least its count of
    partitions (0: any), every one with a leader; the topics still waiting at the deadline
    (or at shutdown)."""
    waiting = dict(partition_counts)
    gave_up = False  # the deadline passed, or the broker is shutting down
    while True:
        waiting = {t: n for t, n in waiting.items() if not _all_led(ctx, t, n)}
        if not waiting or gave_up or trio.current_time() >= deadline:
            return set(waiting)
        gave_up = not await ctx.purgatory.wait([METADATA_KEY], deadline)


def _all_led(ctx: BrokerContext, topic: str, partition_count: int) -> bool:
    partitions = ctx.metadata.topics.get(topic)
    return (
        partitions is not None
        and len(partitions) >= partition_count
        and all(p.leader >= 0 for p in partitions.values())
    )
