"""`format("highwater")`: the PySpark data source (Python Data Source API, Spark 4.x).

Driver side, the readers plan offset ranges from the cluster's high watermarks (never beyond:
consumers see only committed records); executor side, `read` fetches exactly [start, end) of
one partition (partition_reader). Progress lives in Spark's checkpoint as Spark's Kafka
offsets JSON; `commit()` is not relied on (it comes a batch late, and never for the last).
With groupIdForLag, the end of each completed micro-batch is also committed to a consumer
group, only for `highwater groups describe` (docs/spark.md, "Lag").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from client.spark import cluster
from client.spark.data_loss import report_data_loss
from client.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    TopicPartition,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)
from client.spark.options import OptionError, SourceOptions, parse_source_options
from client.spark.schema import source_schema

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["HighwaterDataSource", "HighwaterInputPartition"]

_log = logging.getLogger("highwater.spark")


class HighwaterDataSource(DataSource):
    """Register with `client.spark.register(spark)`; then `spark.readStream.format("highwater")`,
    `spark.read.format("highwater")`, and the same for writes."""

    @classmethod
    def name(cls) -> str:
        return "highwater"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return HighwaterBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HighwaterStreamReader(parse_source_options(self.options, streaming=True))

    # The sink and the executor's read path are imported where used: Spark's streaming source
    # runner imports this module in a fresh process before each query, and waits for it.

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from client.spark.sink import HighwaterBatchWriter, check_sink_schema

        return HighwaterBatchWriter(check_sink_schema(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from client.spark.sink import HighwaterStreamWriter, check_sink_schema

        return HighwaterStreamWriter(check_sink_schema(self.options, schema))


@dataclass(frozen=True)
class HighwaterInputPartition(InputPartition):
    """One Spark task: offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", None)  # InputPartition's field, unused here


def _input_partitions(
    ranges: Sequence[OffsetRange], min_partitions: int | None
) -> list[HighwaterInputPartition]:
    return [
        HighwaterInputPartition(r.tp.topic, r.tp.partition, r.start, r.end)
        for r in split_ranges(ranges, min_partitions)
    ]


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    from client.spark.partition_reader import ReadSettings, read_range

    if not isinstance(partition, HighwaterInputPartition):
        # Spark's stand-in, InputPartition(None), when a batch read planned no partition
        # (every range empty): there is nothing to read.
        return iter(())
    settings = ReadSettings(
        options.bootstrap_servers,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
        security=options.security,
    )
    task = OffsetRange(
        TopicPartition(partition.topic, partition.partition), partition.start, partition.end
    )
    return read_range(settings, task)


def _starting_offsets(options: SourceOptions, snap: cluster.OffsetSnapshot) -> PartitionOffsets:
    """Where a new query (or a batch read) starts, resolved to real offsets; `snap` holds
    every partition's log start offset and HW."""
    if options.starting_timestamp_ms is not None:
        return _by_timestamp(options, options.starting_timestamp_ms)
    bound = options.starting_offsets
    if bound == "latest":
        return dict(snap.latest)
    if bound == "earliest":
        return dict(snap.earliest)
    assert isinstance(bound, dict)
    missing = sorted(set(snap.latest) - set(bound))
    if missing:
        raise OptionError(
            "option 'startingOffsets' must give every partition of the subscription; "
            f"missing: {', '.join(map(str, missing))}"
        )
    return {
        tp: _resolve(tp, offset, snap.earliest, snap.latest, "startingOffsets")
        for tp, offset in bound.items()
    }


def _by_timestamp(options: SourceOptions, timestamp_ms: int) -> PartitionOffsets:
    """startingTimestamp: each partition's first offset with a record at or after it; where
    there is none, startingOffsetsByTimestampStrategy decides (as in Spark's Kafka source)."""
    found, latest = cluster.offsets_for_timestamp(options, timestamp_ms)
    missing = sorted(tp for tp, offset in found.items() if offset < 0)
    if missing and options.timestamp_strategy == "error":
        raise OptionError(
            f"option 'startingTimestamp': no record at or after {timestamp_ms} in "
            f"{', '.join(map(str, missing))}; set 'startingOffsetsByTimestampStrategy' to "
            "'latest' to start those partitions at their end"
        )
    return {tp: offset if offset >= 0 else latest[tp] for tp, offset in found.items()}


def _resolve(
    tp: TopicPartition,
    offset: int,
    earliest: PartitionOffsets,
    latest: PartitionOffsets,
    option: str,
) -> int:
    if tp not in latest:
        raise OptionError(f"option {option!r}: partition {tp} does not exist")
    if offset == EARLIEST:
        return earliest[tp]
    if offset == LATEST:
        return latest[tp]
    return offset


class HighwaterBatchReader(DataSourceReader):
    """`spark.read.format("highwater")`: [startingOffsets, endingOffsets) of each partition,
    planned once on the driver; endingOffsets "latest" means the high watermarks now."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        snap = cluster.snapshot(options, earliest_for=None)
        start = _starting_offsets(options, snap)
        if options.ending_offsets == "latest":
            end = dict(snap.latest)
        else:
            assert isinstance(options.ending_offsets, dict)
            end = {
                tp: _resolve(tp, o, snap.earliest, snap.latest, "endingOffsets")
                for tp, o in options.ending_offsets.items()
            }
        ranges = []
        for tp in sorted(start):
            if tp not in end:
                continue
            if end[tp] > snap.latest.get(tp, end[tp]):
                raise OptionError(
                    f"option 'endingOffsets': {tp} ends at {end[tp]}, beyond its committed "
                    f"records (high watermark {snap.latest[tp]})"
                )
            ranges.append(OffsetRange(tp, start[tp], end[tp]))
        return _input_partitions(ranges, options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class HighwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("highwater")`: each micro-batch reads from the previous end up
    to the high watermarks (fewer with maxOffsetsPerTrigger); new partitions (and, with
    subscribePattern, new topics) start from their earliest offset."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: PartitionOffsets | None = None  # availableNow: stop here
        self._initial: PartitionOffsets | None = None
        self._lag_committed: PartitionOffsets | None = None  # groupIdForLag: last committed
        self._lag_problem: str | None = None

    def initialOffset(self) -> dict[str, Any]:
        # Fixed at the first call, as in Spark's Kafka source: Spark asks more than once while
        # starting a query, and every answer must be the same (each would be a snapshot).
        if self._initial is None:
            snap = cluster.snapshot(self.options, earliest_for=None)
            self._initial = _starting_offsets(self.options, snap)
        return to_json(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = dict(cluster.snapshot(self.options).latest)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        # Spark runs micro-batches one at a time: when it asks for the next end, the batch that
        # ended at `start` is complete (or it is the query's first start, nothing read yet).
        self._report_lag(start)
        begin = from_json(start)
        known = set(begin)
        snap = cluster.snapshot(self.options)
        latest = dict(snap.latest)
        if self._target is not None:
            latest = {
                tp: min(hw, self._target[tp]) for tp, hw in latest.items() if tp in self._target
            }
        new = [tp for tp in latest if tp not in known]
        if new:
            earliest = cluster.snapshot(self.options, earliest_for=new).earliest
            begin.update({tp: earliest.get(tp, 0) for tp in new})
        for tp in known & set(latest):
            if latest[tp] < begin[tp]:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    f"{tp}: the high watermark went back from {begin[tp]} to {latest[tp]}",
                )
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        end = dict(from_json(start))  # partitions gone from the cluster keep their offset
        for tp, offset in latest.items():
            if tp in known and offset < begin[tp]:
                end[tp] = offset  # truncated (reported above): go on from the new end
            elif tp in known or offset > begin[tp]:
                end[tp] = max(offset, begin[tp])
        return to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = from_json(start)
        finish = from_json(end)
        new = [tp for tp in finish if tp not in begin]
        if new:
            # As Spark's Kafka source: a partition that appeared reads from its start.
            earliest = cluster.snapshot(self.options, earliest_for=new).earliest
            begin.update({tp: earliest.get(tp, 0) for tp in new})
        ranges = [
            OffsetRange(tp, begin[tp], offset)
            for tp, offset in sorted(finish.items())
            if offset > begin[tp]
        ]
        return _input_partitions(ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Progress is Spark's checkpoint, and this call comes a batch late: only the lag
        report (groupIdForLag), which latestOffset usually made already."""
        self._report_lag(end)

    def _report_lag(self, completed: dict[str, Any]) -> None:
        """groupIdForLag: commit a completed micro-batch's end offsets, when they changed. A
        failure is logged (once per kind of failure), never raised: lag is only a report."""
        if self.options.group_id_for_lag is None:
            return
        offsets = {tp: o for tp, o in from_json(completed).items() if o >= 0}
        if not offsets or offsets == self._lag_committed:
            return
        problem = cluster.commit_for_lag(self.options, offsets)
        if problem is None:
            self._lag_committed = offsets
        elif problem != self._lag_problem:
            _log.warning(
                "groupIdForLag: could not commit the query's offsets to group %r: %s",
                self.options.group_id_for_lag,
                problem,
            )
        self._lag_problem = problem
