"""Admin requests that change topics answer once every partition has a leader (or time out):
a DelayedCreatePartitions (broker.core.delayed_topics) parked in the purgatory."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from broker.context import BrokerContext
from broker.core.delayed_topics import DelayedCreatePartitions

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
    waiting = DelayedCreatePartitions(partition_counts)
    return await ctx.purgatory.complete(
        waiting, ctx.state, ctx.now_ms, deadline, "topic", ctx.apply
    )
