"""The status page's last hour (`GET /api/history`), kept by the serving broker. Pure.

Every `SAMPLE_INTERVAL_MS` the broker records the whole cluster as its page shows it (the
`/api/cluster` snapshot, broker/cluster_view.py): per topic the sum of its leaders' log end
offsets and its under-replicated partitions; per group and topic the lag and the sum of the
committed offsets. `CAPACITY` samples are kept (an hour), in fixed arrays (broker/core/
series_ring.py), at most `MAX_TOPICS` topics and `MAX_GROUP_TOPICS` (group, topic) pairs.

Each broker keeps the whole cluster's history, not just its own partitions and groups: its
page shows the whole cluster, and a page merging every broker's own history would have to
reach the others' HTTP listeners (ports, TLS and passwords of their own) and would lose a
partition's line each time its leadership moves. The cost is the same samples on every
broker with a metrics listener, and a broker started late knows only what it has seen.

Served as: records/s in per topic (the growth of its leaders' log end offsets), records/s
out per topic (the growth of the consumer groups' committed offsets on it), under-replicated
partitions per topic and in total, and each group's lag in records, each filtered as
`/api/cluster` is (broker/core/visible_cluster.py): only the topics and groups the principal
may DESCRIBE, a group's lag and a topic's records out only over those.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from broker.core.series_ring import SeriesRing
from broker.core.visible_cluster import MayDescribe
from protocol.acl import ResourceType

__all__ = [
    "CAPACITY",
    "MAX_GROUP_TOPICS",
    "MAX_TOPICS",
    "SAMPLE_INTERVAL_MS",
    "StatusHistory",
    "rates_per_s",
]

SAMPLE_INTERVAL_MS: Final = 10_000
CAPACITY: Final = 360  # an hour of samples
MAX_TOPICS: Final = 250
MAX_GROUP_TOPICS: Final = 500

_N = TypeVar("_N", int, float)

# Field indexes.
_LOG_END_OFFSET_SUM, _UNDER_REPLICATED = 0, 1
_LAG, _COMMITTED_SUM = 0, 1


def _everything(kind: ResourceType, name: str) -> bool:
    return True


@dataclass(frozen=True)
class _Columns:
    taken: int  # the samples taken when read out
    times_ms: list[int]
    topics: dict[str, tuple[list[float | None], list[int | None]]]  # records in/s, under-repl.
    pairs: dict[tuple[str, str], tuple[list[int | None], list[float | None]]]  # lag, out/s


class StatusHistory:
    def __init__(
        self,
        interval_ms: int = SAMPLE_INTERVAL_MS,
        capacity: int = CAPACITY,
        max_topics: int = MAX_TOPICS,
        max_group_topics: int = MAX_GROUP_TOPICS,
    ) -> None:
        self.interval_ms = interval_ms
        self.topics: SeriesRing[str] = SeriesRing(capacity, 2, max_topics)
        self.groups: SeriesRing[tuple[str, str]] = SeriesRing(capacity, 2, max_group_topics)
        self._cache: _Columns | None = None

    def record(self, snapshot: dict[str, Any]) -> None:
        """One sample from a cluster snapshot (ClusterView.snapshot), at its time."""
        time_ms = int(snapshot["generated_ms"])
        topics: dict[str, tuple[int | None, int]] = {}
        for topic in snapshot["topics"]:
            under = sum(1 for p in topic["partitions"] if p["under_replicated"] or p["offline"])
            topics[topic["name"]] = (topic["log_end_offset_sum"], under)
        self.topics.add(time_ms, topics)
        pairs: dict[tuple[str, str], list[int | None]] = {}
        for group in snapshot["groups"]:
            for row in group["partitions"]:
                lag_committed = pairs.setdefault((group["name"], row["topic"]), [None, 0])
                if row["lag"] is not None:
                    lag_committed[_LAG] = (lag_committed[_LAG] or 0) + row["lag"]
                lag_committed[_COMMITTED_SUM] = (lag_committed[_COMMITTED_SUM] or 0) + row[
                    "committed"
                ]
        self.groups.add(time_ms, pairs)

    def gap(self, time_ms: int) -> None:
        """A sample that could not be taken: every series has a gap there (a break in its
        line, rather than a line drawn across the missing time)."""
        self.topics.add(time_ms, {})
        self.groups.add(time_ms, {})

    def to_json(self, may_describe: MayDescribe = _everything) -> dict[str, Any]:
        columns = self._columns()
        times = columns.times_ms
        topics = sorted(t for t in columns.topics if may_describe(ResourceType.TOPIC, t))
        visible_topics = set(topics)
        pairs = sorted(
            (g, t)
            for g, t in columns.pairs
            if t in visible_topics and may_describe(ResourceType.GROUP, g)
        )
        out_rates: dict[str, list[Sequence[float | None]]] = {}
        lags: dict[str, list[Sequence[int | None]]] = {}
        for pair in pairs:
            lag, out = columns.pairs[pair]
            out_rates.setdefault(pair[1], []).append(out)
            lags.setdefault(pair[0], []).append(lag)
        return {
            "interval_ms": self.interval_ms,
            "capacity": self.topics.capacity,
            "times_ms": times,
            "under_replicated": _sums((columns.topics[t][1] for t in topics), len(times)),
            "topics": [
                {
                    "name": t,
                    "records_in_per_s": columns.topics[t][0],
                    "records_out_per_s": _sums(out_rates.get(t, []), len(times)),
                    "under_replicated": columns.topics[t][1],
                }
                for t in topics
            ],
            "groups": [{"name": g, "lag": _sums(lags[g], len(times))} for g in sorted(lags)],
            "not_kept": {"topics": self.topics.refused, "group_topics": self.groups.refused},
        }

    def _columns(self) -> _Columns:
        """Every series read out, rates worked out: once a sample, however many pages ask
        (reading 100 topics' hour takes tens of ms of the event loop)."""
        if self._cache is not None and self._cache.taken == self.topics.taken:
            return self._cache
        times = self.topics.times_ms()
        self._cache = _Columns(
            self.topics.taken,
            times,
            {
                t: (
                    rates_per_s(times, self.topics.values(t, _LOG_END_OFFSET_SUM)),
                    self.topics.values(t, _UNDER_REPLICATED),
                )
                for t in self.topics.names()
            },
            {
                pair: (
                    self.groups.values(pair, _LAG),
                    rates_per_s(times, self.groups.values(pair, _COMMITTED_SUM)),
                )
                for pair in self.groups.names()
            },
        )
        return self._cache

    def memory_bytes(self) -> int:
        return self.topics.memory_bytes() + self.groups.memory_bytes()


def rates_per_s(times_ms: Sequence[int], totals: Sequence[int | None]) -> list[float | None]:
    """Per second between successive samples of a growing total (None: unknown, the first
    sample, or a total that fell, as when a topic is re-created)."""
    out: list[float | None] = [None] * len(totals)
    for i in range(1, len(totals)):
        before, after = totals[i - 1], totals[i]
        elapsed_ms = times_ms[i] - times_ms[i - 1]
        if before is None or after is None or after < before or elapsed_ms <= 0:
            continue
        out[i] = round((after - before) * 1000 / elapsed_ms, 1)
    return out


def _sums(series: Iterable[Sequence[_N | None]], length: int) -> list[_N | None]:
    """Sample by sample, the sum of the values present (None where none is)."""
    out: list[_N | None] = [None] * length
    for values in series:
        for i, value in enumerate(values):
            if value is not None:
                previous = out[i]
                out[i] = value if previous is None else previous + value
    return out
