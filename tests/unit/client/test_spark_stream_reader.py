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


def test_group_id_for_lag_commits_each_completed_batch_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """groupIdForLag: the end of each completed batch (latestOffset's start, and commit's end)
    goes to the group once; a failure is logged once per kind and never fails the query."""
    scripted = _Cluster()
    monkeypatch.setattr(cluster, "snapshot", scripted.snapshot)
    commits: list[dict[TopicPartition, int]] = []
    problems: list[str | None] = [None]

    def commit_for_lag(options: object, offsets: dict[TopicPartition, int]) -> str | None:
        commits.append(dict(offsets))
        return problems[0]

    monkeypatch.setattr(cluster, "commit_for_lag", commit_for_lag)
    options = parse_source_options(
        {"bootstrap.servers": "h:1", "subscribe": "t", "groupIdForLag": "job-lag"},
        streaming=True,
    )
    assert options.group_id_for_lag == "job-lag"
    reader = HighwaterStreamReader(options)
    start = {"t": {"0": 5, "1": 7}}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert commits == [{T0: 5, T1: 7}]  # the query's start: nothing read yet
    reader.latestOffset(start, reader.getDefaultReadLimit())
    reader.commit(start)
    assert len(commits) == 1  # unchanged offsets are not committed again
    problems[0] = "UNKNOWN_MEMBER_ID: the group has active members"
    with caplog.at_level("WARNING", logger="highwater.spark"):
        reader.latestOffset(end, reader.getDefaultReadLimit())
        reader.commit(end)
    assert commits[1:] == [{T0: 110, T1: 210}] * 2  # retried: it failed
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "job-lag" in warnings[0] and "active members" in warnings[0]


def test_without_group_id_for_lag_nothing_is_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    def commit_for_lag(options: object, offsets: object) -> str | None:
        raise AssertionError("no lag commits without groupIdForLag")

    monkeypatch.setattr(cluster, "commit_for_lag", commit_for_lag)
    monkeypatch.setattr(cluster, "snapshot", _Cluster().snapshot)
    reader = HighwaterStreamReader(
        parse_source_options({"bootstrap.servers": "h:1", "subscribe": "t"}, streaming=True)
    )
    reader.commit({"t": {"0": 1}})
    reader.latestOffset({"t": {"0": 1, "1": 1}}, reader.getDefaultReadLimit())
