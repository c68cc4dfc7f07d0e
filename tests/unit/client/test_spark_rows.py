"""Records to Arrow for the Spark source, and a sink batch's columns to records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from client.consumer import ConsumerRecord  # noqa: E402
from client.spark import columns  # noqa: E402
from client.spark.columns import ColumnBuilder  # noqa: E402
from client.spark.rows import (  # noqa: E402
    SinkRow,
    sink_rows,
    source_schema,
)
from protocol.errors import CorruptRecordError  # noqa: E402
from protocol.records import (  # noqa: E402
    CRC_START,
    TIMESTAMP_TYPE_BIT,
    Record,
    build_batch,
    build_batch_from_entries,
    crc32c,
    decode_batches,
)

BASE_SCHEMA = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),  # Spark's TimestampType in Arrow
    ("timestampType", pa.int32()),
]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def record(offset: int, **fields: Any) -> ConsumerRecord:
    values: dict[str, Any] = {
        "topic": "events",
        "partition": 3,
        "offset": offset,
        "timestamp": 1_700_000_000_000 + offset,
        "key": b"k%d" % offset,
        "value": b"v%d" % offset,
    }
    values.update(fields)
    return ConsumerRecord(**values)


def records_to_batch(records: list[ConsumerRecord], include_headers: bool) -> Any:
    """The records stored as the log stores them (one batch each, at their offsets), fetched
    through ColumnBuilder as the source's read path does."""
    stored = b"".join(
        build_batch(
            [Record(r.value, r.key, r.timestamp, r.headers)], base_offset=r.offset, now_ms=0
        )
        for r in records
    )
    builder = ColumnBuilder("events", 3, include_headers)
    builder.add(stored, 0, 2**62)
    return builder.flush()


# --- source: ColumnBuilder -----------------------------------------------------------------------


def test_schema_is_sparks_kafka_source_schema() -> None:
    batch = records_to_batch([record(0)], include_headers=False)
    assert batch.schema == pa.schema(BASE_SCHEMA)


def test_schema_with_headers() -> None:
    batch = records_to_batch([record(0)], include_headers=True)
    assert batch.schema == pa.schema([*BASE_SCHEMA, ("headers", HEADERS_TYPE)])


def test_ddl_names_the_same_columns_in_the_same_order() -> None:
    without = source_schema(False)
    with_headers = source_schema(True)
    assert [part.split()[0] for part in without.split(", ")] == [n for n, _ in BASE_SCHEMA]
    assert with_headers.startswith(without + ", ")
    assert with_headers.endswith("headers array<struct<key: string, value: binary>>")
    assert "timestamp timestamp" in without


def test_values() -> None:
    records = [
        record(10),
        record(11, key=None),
        record(12, value=None),
        record(13, key=b"", value=b"\x00\xff"),
    ]
    batch = records_to_batch(records, include_headers=False)
    assert batch.num_rows == 4
    assert batch.to_pydict() | {"timestamp": None} == {
        "key": [b"k10", None, b"k12", b""],
        "value": [b"v10", b"v11", None, b"\x00\xff"],
        "topic": ["events"] * 4,
        "partition": [3] * 4,
        "offset": [10, 11, 12, 13],
        "timestamp": None,
        "timestampType": [0, 0, 0, 0],
    }


def test_timestamps_are_milliseconds_as_utc_microseconds() -> None:
    records = [record(0, timestamp=1_700_000_000_123), record(1, timestamp=1)]
    column = records_to_batch(records, include_headers=False).column("timestamp")
    assert column.type == pa.timestamp("us", tz="UTC")
    assert column.cast(pa.int64()).to_pylist() == [1_700_000_000_123_000, 1_000]
    assert column.to_pylist() == [
        datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC),
        datetime(1970, 1, 1, 0, 0, 0, 1_000, tzinfo=UTC),
    ]


def test_headers_when_asked() -> None:
    records = [
        record(0, headers=(("trace", b"abc"), ("empty", None), ("trace", b""))),
        record(1),
    ]
    batch = records_to_batch(records, include_headers=True)
    assert batch.column("headers").to_pylist() == [
        [
            {"key": "trace", "value": b"abc"},
            {"key": "empty", "value": None},
            {"key": "trace", "value": b""},
        ],
        [],
    ]
    assert "headers" not in records_to_batch(records, include_headers=False).schema.names


@pytest.mark.parametrize("include_headers", [False, True])
def test_no_records_is_an_empty_batch_in_the_same_schema(include_headers: bool) -> None:
    batch = records_to_batch([], include_headers=include_headers)
    assert batch.num_rows == 0
    assert batch.schema == records_to_batch([record(0)], include_headers).schema


def test_a_range_cuts_batches_mid_way() -> None:
    stored = build_batch(
        [Record(b"v%d" % i, timestamp_ms=100 + i) for i in range(10)], base_offset=20, now_ms=0
    )
    stored += build_batch([Record(b"w")], base_offset=30, now_ms=0)
    builder = ColumnBuilder("t", 0, include_headers=False)
    assert builder.add(stored, 23, 27) == (2, 31)  # both batches seen
    out = builder.flush().to_pydict()
    assert out["offset"] == [23, 24, 25, 26]
    assert out["value"] == [b"v3", b"v4", b"v5", b"v6"]
    assert [t.timestamp() * 1000 for t in out["timestamp"]] == [103, 104, 105, 106]


def test_a_cleaned_batch_keeps_its_offsets_and_a_range_cuts_it() -> None:
    """A compacted topic's batch has gaps: offsets as stored, cut by [start, end)."""
    entries = [(d, d, b"k%d" % d, b"v%d" % d, ()) for d in (0, 3, 4, 8)]
    stored = build_batch_from_entries(
        entries, base_timestamp=100, max_timestamp=108, base_offset=10, last_offset_delta=9
    )
    builder = ColumnBuilder("t", 0, include_headers=False)
    assert builder.add(stored, 11, 19) == (1, 20)
    out = builder.flush().to_pydict()
    assert out["offset"] == [13, 14, 18]
    assert out["key"] == [b"k3", b"k4", b"k8"]
    assert [t.timestamp() * 1000 for t in out["timestamp"]] == [103, 104, 108]


@pytest.mark.parametrize("compiled", [False, True])
def test_an_emptied_batch_adds_no_rows_and_is_read_past(compiled: bool) -> None:
    """A producer's last batch the log cleaner emptied (Kafka's RETAIN_EMPTY): record_count 0,
    its offsets kept. It adds no row, the range read goes past it, and a range inside it
    alone is empty; with the compiled decoder or without."""
    emptied = build_batch_from_entries(
        (), base_timestamp=100, max_timestamp=100, producer_id=8, producer_epoch=0,
        base_sequence=0, base_offset=10, last_offset_delta=3,
    )  # fmt: skip
    stored = (
        build_batch([Record(b"a")], base_offset=9, now_ms=0)
        + emptied
        + build_batch([Record(b"b"), Record(b"c")], base_offset=14, now_ms=0)
    )
    decoder = columns._decode_section if compiled else None
    with mock.patch.object(columns, "_decode_section", decoder):
        builder = ColumnBuilder("t", 0, include_headers=True)
        assert builder.add(stored, 9, 20) == (3, 16)
        out = builder.flush().to_pydict()
        assert out["offset"] == [9, 14, 15]
        assert out["value"] == [b"a", b"b", b"c"]
        assert builder.add(emptied, 11, 13) == (1, 14)
        assert builder.flush().num_rows == 0


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    whole = build_batch([Record(b"a")], base_offset=0, now_ms=0)
    cut = build_batch([Record(b"b")], base_offset=1, now_ms=0)[:-3]
    builder = ColumnBuilder("t", 0, include_headers=False)
    assert builder.add(whole + cut, 0, 10) == (1, 1)
    assert builder.flush().column("offset").to_pylist() == [0]
    assert builder.add(cut, 1, 10) == (0, -1)


def test_a_malformed_record_is_a_clear_error() -> None:
    # A well-formed batch (CRC and all) whose record has four fields instead of five.
    stored = build_batch_from_entries([[0, 0, None, b"v"]], base_timestamp=0, max_timestamp=0)
    with pytest.raises(CorruptRecordError, match="record 0"):
        ColumnBuilder("t", 0, include_headers=False).add(stored, 0, 10)


_maybe_bytes = st.one_of(st.none(), st.binary(max_size=40))
_records = st.builds(
    Record,
    value=_maybe_bytes,
    key=_maybe_bytes,
    timestamp_ms=st.integers(0, 2**41),
    headers=st.one_of(  # none, as most records have: the compiled decoder's case
        st.just(()),
        st.lists(st.tuples(st.text(max_size=5), _maybe_bytes), max_size=2).map(tuple),
    ),
)


def with_log_append_time(batch: bytes) -> bytes:
    """`batch` with the LogAppendTime attribute set (the CRC recomputed)."""
    data = bytearray(batch)
    attributes = int.from_bytes(data[CRC_START : CRC_START + 2], "big") | TIMESTAMP_TYPE_BIT
    data[CRC_START : CRC_START + 2] = attributes.to_bytes(2, "big")
    data[CRC_START - 4 : CRC_START] = crc32c(data[CRC_START:]).to_bytes(4, "big")
    return bytes(data)


@settings(deadline=None)  # the first example pays for pyarrow's lazy imports
@given(
    batches=st.lists(
        st.tuples(st.lists(_records, min_size=1, max_size=6), st.booleans()), max_size=6
    ),
    bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    include_headers=st.booleans(),
    compiled=st.booleans(),
)
def test_columns_match_the_records_the_consumer_decodes(
    batches: list[tuple[list[Record], bool]],
    bounds: tuple[int, int],
    include_headers: bool,
    compiled: bool,
) -> None:
    """Differential: ColumnBuilder's columns (built by Arrow and numpy from the compiled
    decoder's or the Python path's buffers) hold what decoding the same bytes record by record
    gives, for any cut [start, end) of the batches."""
    decoder = columns._decode_section if compiled else None
    with mock.patch.object(columns, "_decode_section", decoder):
        _check_columns_match(batches, bounds, include_headers)


def _check_columns_match(
    batches: list[tuple[list[Record], bool]], bounds: tuple[int, int], include_headers: bool
) -> None:
    stored, offset = b"", 0
    for records, log_append_time in batches:
        batch = build_batch(records, base_offset=offset, now_ms=0)
        stored += with_log_append_time(batch) if log_append_time else batch
        offset += len(records)
    start, end = sorted(bounds)
    builder = ColumnBuilder("events", 3, include_headers)
    builder.add(stored, start, end)
    out = builder.flush()
    expected = [
        (batch.header, r)
        for batch in decode_batches(stored)
        for r in batch.records
        if start <= r.offset < end
    ]
    assert len(builder) == 0  # flush starts anew
    assert out.to_pydict() == {
        "key": [r.key for _, r in expected],
        "value": [r.value for _, r in expected],
        "topic": ["events"] * len(expected),
        "partition": [3] * len(expected),
        "offset": [r.offset for _, r in expected],
        "timestamp": [EPOCH + timedelta(milliseconds=r.timestamp_ms) for _, r in expected],
        "timestampType": [h.timestamp_type for h, _ in expected],
    } | (
        {"headers": [[{"key": k, "value": v} for k, v in r.headers] for _, r in expected]}
        if include_headers
        else {}
    )


# --- sink: sink_rows ----------------------------------------------------------------------------


def sink_batch(**columns: Any) -> Any:
    return pa.RecordBatch.from_pydict(columns)


def test_sink_rows_with_every_column() -> None:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"v0", None], pa.binary()),
            pa.array([b"k0", None], pa.binary()),
            pa.array(["t0", "t1"], pa.string()),
            pa.array([2, None], pa.int32()),
            pa.array([[{"key": "h", "value": b"x"}], None], HEADERS_TYPE),
            pa.array([1, 2], pa.int64()),  # not a sink column: ignored
        ],
        names=["value", "key", "topic", "partition", "headers", "other"],
    )
    assert list(sink_rows(batch, None)) == [
        SinkRow("t0", b"v0", b"k0", 2, (("h", b"x"),)),
        SinkRow("t1", None, None, None, ()),
    ]


def test_sink_rows_default_topic_when_no_topic_column() -> None:
    batch = sink_batch(value=pa.array([b"a", b"b"], pa.binary()))
    assert list(sink_rows(batch, "out")) == [
        SinkRow("out", b"a", None, None, ()),
        SinkRow("out", b"b", None, None, ()),
    ]


def test_sink_rows_the_topic_option_overrides_the_column() -> None:
    # As Spark's Kafka sink: the 'topic' option, when set, overrides any topic column.
    batch = sink_batch(
        value=pa.array([b"a", b"b"], pa.binary()), topic=pa.array(["t", None], pa.string())
    )
    assert [row.topic for row in sink_rows(batch, "out")] == ["out", "out"]


def test_sink_rows_missing_topic_is_an_error_naming_the_row() -> None:
    batch = sink_batch(
        value=pa.array([b"a", b"b"], pa.binary()), topic=pa.array(["t", None], pa.string())
    )
    rows = sink_rows(batch, None)
    assert next(rows).topic == "t"
    with pytest.raises(ValueError, match="row 1 has no topic"):
        next(rows)
    with pytest.raises(ValueError, match="row 0 has no topic"):
        list(sink_rows(sink_batch(value=pa.array([b"a"], pa.binary())), None))


def test_sink_rows_strings_are_sent_as_utf8() -> None:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["héllo", None, ""], pa.string()),
            pa.array(["clé", "k", None], pa.string()),
            pa.array(
                [[{"key": "h", "value": "ü"}], [], None],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
            ),
        ],
        names=["value", "key", "headers"],
    )
    assert list(sink_rows(batch, "t")) == [
        SinkRow("t", "héllo".encode(), "clé".encode(), None, (("h", b"\xc3\xbc"),)),
        SinkRow("t", None, b"k", None, ()),
        SinkRow("t", b"", None, None, ()),
    ]


def test_sink_rows_of_an_empty_batch() -> None:
    assert list(sink_rows(sink_batch(value=pa.array([], pa.binary())), None)) == []


def test_sink_rows_columns_are_found_whatever_their_case() -> None:
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"v"], pa.binary()), pa.array(["t"], pa.string())], names=["Value", "TOPIC"]
    )
    assert list(sink_rows(batch, None)) == [SinkRow("t", b"v", None, None, ())]
