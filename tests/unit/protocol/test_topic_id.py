"""Topic ids (KIP-516) as Kafka writes them (protocol.topic_id)."""

from __future__ import annotations

import uuid

import pytest

from protocol.topic_id import (
    METADATA_TOPIC_ID,
    NO_TOPIC_ID,
    ZERO_UUID,
    from_uuid,
    new_topic_id,
    parse_topic_id,
    to_uuid,
)


def test_the_string_form_is_kafkas_uuid_to_string() -> None:
    # Kafka: new Uuid(0L, 1L).toString() (METADATA_TOPIC_ID) is "AAAAAAAAAAAAAAAAAAAAAQ".
    assert from_uuid(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    value = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    text = from_uuid(value)
    assert len(text) == 22 and "=" not in text
    assert parse_topic_id(text) == value
    assert from_uuid(ZERO_UUID) == NO_TOPIC_ID and parse_topic_id(NO_TOPIC_ID) == ZERO_UUID


@pytest.mark.parametrize("text", ["short", "A" * 23, "!" * 22, "AAAAAAAAAAAAAAAAAAAAA="])
def test_a_malformed_id_is_refused_or_read_as_none(text: str) -> None:
    with pytest.raises(ValueError, match="topic id"):
        parse_topic_id(text)
    assert to_uuid(text) == ZERO_UUID


def test_a_new_id_is_never_reserved_nor_starts_with_a_dash() -> None:
    dash = uuid.UUID(bytes=b"\xfb" + bytes(15))  # base64url "-w...": a command-line option
    assert from_uuid(dash).startswith("-")
    fresh = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    drawn = iter([ZERO_UUID, METADATA_TOPIC_ID, dash, fresh])
    assert new_topic_id(lambda: next(drawn)) == from_uuid(fresh)
    assert len({new_topic_id() for _ in range(100)}) == 100
