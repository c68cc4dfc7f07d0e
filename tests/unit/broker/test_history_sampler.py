"""broker.history_sampler: the status page's history is sampled on its interval, and a failed
sample is a gap, not the end of the sampling (nor of the broker)."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing

from broker.cluster_view import ClusterView
from broker.core.status_history import StatusHistory
from broker.history_sampler import sample_history
from client.network import BrokerConnectionError


class _View:
    def __init__(self) -> None:
        self.calls = 0

    async def snapshot(self) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 2:
            raise BrokerConnectionError("peer gone")
        if self.calls == 3:
            raise KeyError("anything else")
        return {
            "generated_ms": int(trio.current_time() * 1000),
            "topics": [{"name": "t", "log_end_offset_sum": 10 * self.calls, "partitions": []}],
            "groups": [],
        }


def test_one_sample_an_interval_and_failures_are_gaps() -> None:
    history = StatusHistory(interval_ms=10_000)
    view = _View()

    async def main() -> None:
        with trio.move_on_after(45):  # samples at 0, 10, 20, 30 and 40 s
            await sample_history(cast(ClusterView, view), history)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert view.calls == 5
    # The two failed samples are gaps (at the wall clock's time: not this test's clock).
    times = history.topics.times_ms()
    assert len(times) == 5
    assert (times[0], times[3], times[4]) == (0, 30_000, 40_000)
    assert history.topics.values("t", 0) == [10, None, None, 40, 50]
