"""The timer that feeds the status page's history (broker/core/status_history.py).

Its own task beside the metrics listener rather than a task of the broker's housekeeping
scheduler (broker/main.py): a sample awaits the other brokers (ListOffsets, ListGroups,
OffsetFetch, each bounded by the cluster view's timeout), and the scheduler's tasks are
synchronous. It shares the cluster view's snapshot with open pages, so a sample costs at most
one round of requests more every interval.
"""

from __future__ import annotations

import structlog
import trio

from broker.cluster_view import ClusterView
from broker.context import wall_clock_ms
from broker.core.status_history import StatusHistory
from client import clock
from client.network import BrokerConnectionError
from protocol.errors import HighwaterError

__all__ = ["sample_history"]


async def sample_history(view: ClusterView, history: StatusHistory) -> None:
    """Record a snapshot every `history.interval_ms` (on trio's clock, so a wall clock step
    neither stalls nor floods it; the samples carry the wall clock, for the page's axis)."""
    log = structlog.get_logger("highwater.history")
    due_ms = clock.now_ms()
    while True:
        try:
            history.record(await view.snapshot())
        except (BrokerConnectionError, HighwaterError, OSError) as exc:
            # A gap in the charts; the next interval tries again.
            history.gap(wall_clock_ms())
            log.warning("status history sample failed", error=str(exc))
        except Exception:
            # Whatever else a snapshot meets (a request to /api/cluster would answer 500),
            # the broker serves on: its charts are not worth its life.
            history.gap(wall_clock_ms())
            log.exception("status history sample failed")
        due_ms = max(due_ms + history.interval_ms, clock.now_ms())
        await trio.sleep_until(due_ms / 1000)
