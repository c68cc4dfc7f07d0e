"""The streaming reader's driver-side answers, over a scripted cluster (no brokers)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from client.spark import cluster
from client.spark.offsets import TopicPartition
from client.spark.options import parse_source_options
from client.spark.source import HighwaterStreamReader

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class _Cluster:
    """Log start offsets and HWs that move on after every snapshot, as a live topic's do."""

    def __init__(self) -> None:
        self.snapshots = 0

    def snapshot(
        self, options: object, *, earliest_for: Iterable[TopicPartition] | None = ()
    ) -> cluster.OffsetSnapshot:
        self.snapshots += 1
        moved = 10 * self.snapshots
        latest = {T0: 100 + moved, T1: 200 + moved}
        wanted = set(latest) if earliest_for is None else set(earliest_for)
        return cluster.OffsetSnapshot(latest, {tp: moved for tp in latest if tp in wanted})


@pytest.mark.parametrize("starting", ["earliest", "latest"])
def test_initial_offset_is_fixed_at_the_first_answer(
    monkeypatch: pytest.MonkeyPatch, starting: str
) -> None:
    """Spark asks for the initial offset more than once while a query starts; the answers
    must agree even though the log moved in between (and only the first costs a snapshot)."""
    scripted = _Cluster()
    monkeypatch.setattr(cluster, "snapshot", scripted.snapshot)
    options = parse_source_options(
        {"bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": starting},
        streaming=True,
    )
    reader = HighwaterStreamReader(options)
    first = reader.initialOffset()
    assert reader.initialOffset() == first
    assert scripted.snapshots == 1
    expected = {"earliest": {"0": 10, "1": 10}, "latest": {"0": 110, "1": 210}}[starting]
    assert first == {"t": expected}
