"""Every hex example of docs/protocol.md §8, decoded with the real codec, so the spec's bytes
stay true: frames decode and re-encode to the same bytes, Example B is the broker's real API
list, batches decode to the records the text describes and rebuild byte for byte."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from protocol.apis import supported_versions
from protocol.codec import decode_request, decode_response, encode_request, encode_response
from protocol.compression import Compression
from protocol.records import Record, build_batch, decode_batch, decode_batches, read_header

SPEC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
TS = 1_700_000_000_000
E_RECORDS = [Record(value=b"hello", key=b"k", timestamp_ms=TS)]
K_RECORDS = [
    Record(value=b"hello", key=b"k", timestamp_ms=TS),
    Record(value=b"world", key=None, timestamp_ms=TS + 5, headers=(("trace", b"1"), ("nil", None))),
]


def _examples() -> dict[str, list[bytes]]:
    """Example letter -> the bytes of its ```hex blocks, in order."""
    text = SPEC.read_text()
    section = text[text.index("## 8. Worked examples") : text.index("## 9. Writing a client")]
    found: dict[str, list[bytes]] = {}
    for part in re.split(r"^### Example ", section, flags=re.M)[1:]:
        letter = part[0]
        blocks = re.findall(r"```hex\n(.*?)```", part, flags=re.S)
        found[letter] = [
            bytes.fromhex("".join(line[6:] for line in block.splitlines())) for block in blocks
        ]
    return found


EXAMPLES = _examples()


def _frame(data: bytes) -> bytes:
    assert int.from_bytes(data[:4], "big", signed=True) == len(data) - 4, "length prefix"
    return data[4:]


def _request(data: bytes) -> Any:
    request = decode_request(_frame(data))
    assert encode_request(request.header, request.body) == data
    return request


def _response(data: bytes, api_key: int, version: int) -> Any:
    response = decode_response(_frame(data), api_key, version)
    assert response.header.correlation_id is not None
    assert encode_response(response.header.correlation_id, api_key, version, response.body) == data
    return response


def test_every_example_is_checked() -> None:
    assert {k: len(v) for k, v in EXAMPLES.items()} == {
        "A": 1, "B": 1, "C": 2, "D": 1, "E": 1, "F": 1, "G": 1, "H": 1, "I": 1, "J": 2, "K": 4,
    }  # fmt: skip


def test_requests_decode_and_reencode_byte_for_byte() -> None:
    a = _request(EXAMPLES["A"][0])
    assert (a.header.api_key, a.header.api_version, a.header.correlation_id) == (18, 0, 1)
    assert a.header.client_id == "hw"
    c1, c0 = (_request(data) for data in EXAMPLES["C"])
    assert (c1.header.api_version, c1.body.topics) == (1, ("events",))
    assert (c0.header.api_version, c0.body.topics) == (0, None)
    f = _request(EXAMPLES["F"][0])
    (topic,) = f.body.topic_data
    assert (f.body.acks, topic.name, topic.partition_data[0].records) == (
        -1,
        "events",
        EXAMPLES["E"][0],
    )
    i = _request(EXAMPLES["I"][0])
    assert i.body.topics[0].partitions[0].fetch_offset == 41


def test_example_b_is_what_the_broker_lists() -> None:
    response = _response(EXAMPLES["B"][0], 18, 0)
    assert response.body.api_keys == supported_versions()


def test_responses_decode_and_reencode_byte_for_byte() -> None:
    d = _response(EXAMPLES["D"][0], 3, 1)
    assert (d.body.controller_id, d.body.controller_epoch) == (1, 7)
    assert d.body.topics[0].partitions[0].leader_epoch == 5
    g = _response(EXAMPLES["G"][0], 0, 0)
    assert g.body.responses[0].partition_responses[0].base_offset == 41
    j = _response(EXAMPLES["J"][0], 1, 0)
    records = j.body.responses[0].partitions[0].records
    assert records == EXAMPLES["J"][1]


def test_batches_decode_to_the_records_described() -> None:
    e = EXAMPLES["E"][0]
    assert build_batch(E_RECORDS, now_ms=TS) == e
    assert [(r.key, r.value, r.timestamp_ms) for r in decode_batch(e).records] == [
        (b"k", b"hello", TS)
    ]
    h = decode_batch(EXAMPLES["H"][0])
    assert (h.header.base_offset, h.header.partition_leader_epoch) == (41, 5)
    assert h.header.crc == read_header(e).crc  # the leader changes no CRC-covered byte
    (whole,) = decode_batches(EXAMPLES["J"][1])  # the partial batch after it is skipped
    assert [r.offset for r in whole.records] == [41]


@pytest.mark.parametrize(
    ("index", "codec"),
    [(0, Compression.GZIP), (1, Compression.ZSTD), (2, Compression.SNAPPY), (3, Compression.LZ4)],
)
def test_compressed_batches_decode_and_rebuild(index: int, codec: Compression) -> None:
    data = EXAMPLES["K"][index]
    assert read_header(data).compression == codec
    batch = decode_batch(data)
    assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in batch.records] == [
        (b"k", b"hello", TS, ()),
        (None, b"world", TS + 5, (("trace", b"1"), ("nil", None))),
    ]
    assert build_batch(K_RECORDS, compression=codec, now_ms=TS) == data
