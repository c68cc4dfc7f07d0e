"""kcat's offset forms (client/cli/offsets.py) and -X properties (client/cli/properties.py)."""

from __future__ import annotations

import pytest

from client.cli.offsets import OffsetSpec, Start, parse_offsets, parse_timestamp
from client.cli.properties import (
    CONSUMER_PROPERTIES,
    PRODUCER_PROPERTIES,
    PropertyError,
    parse_properties,
)


@pytest.mark.parametrize(
    ("values", "spec"),
    [
        ([], OffsetSpec(Start("end"))),
        (["beginning"], OffsetSpec(Start("beginning"))),
        (["stored"], OffsetSpec(Start("stored"))),
        (["42"], OffsetSpec(Start("absolute", 42))),
        (["-5"], OffsetSpec(Start("from_end", 5))),
        (["s@1700000000000"], OffsetSpec(Start("timestamp", 1_700_000_000_000))),
        (["e@1700000000000"], OffsetSpec(Start("end"), 1_700_000_000_000)),
        (["-3", "e@7"], OffsetSpec(Start("from_end", 3), 7)),
    ],
)
def test_kcat_offset_forms(values: list[str], spec: OffsetSpec) -> None:
    assert parse_offsets(values) == spec


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["x"], "is not an offset"),
        (["1", "2"], "two start offsets"),
        (["e@1", "e@2"], "e@ given twice"),
        (["s@soon"], "ISO-8601"),
    ],
)
def test_bad_offsets(values: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_offsets(values)


def test_timestamps_in_ms_or_iso_8601() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T23:13:20.5+01:00") == 1_700_000_000_500


def test_properties_by_kafka_name() -> None:
    kwargs = parse_properties(
        ["acks=all", "linger.ms=20", "compression.type=SNAPPY", "enable.idempotence=false"],
        PRODUCER_PROPERTIES,
        "producer",
    )
    assert kwargs == {
        "acks": -1,
        "linger_ms": 20.0,
        "compression": "snappy",
        "enable_idempotence": False,
    }
    assert parse_properties(["fetch.min.bytes=1024"], CONSUMER_PROPERTIES, "consumer") == {
        "fetch_min_bytes": 1024
    }
    for bad, message in [
        ("linger.ms", "is not key=value"),
        ("linger.ms=-1", "must not be negative"),
        ("retries=many", "retries=many: expected a whole number"),
        ("transactional.id=t", "transactions are not available"),
    ]:
        with pytest.raises(PropertyError, match=message):
            parse_properties([bad], PRODUCER_PROPERTIES, "producer")
