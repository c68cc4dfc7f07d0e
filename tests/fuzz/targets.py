"""The inputs of the fuzz targets, one pair per API (every API of protocol.apis.APIS):

- decoder inputs: the bytes of one connection, aimed at that API: its valid frames at every
  version mutated as bytes (set, flip, insert, delete, duplicate, cut short), one schema site
  given a wrong type, a missing or an extra field, a valid header of the API with a random
  msgpack body, and requests of the API with nonsense values;
- handler inputs: requests of the API that decode, with values from the schema: edge-case
  integers, odd names (the seeded topic among them), and for a `records` field every crafted
  batch of tests/integration/fuzz_frames.py (valid, damaged, poison), batches built from
  random records in every codec, and such batches with one byte changed and the CRC fixed.

Hypothesis draws them (tests/fuzz/run.py runs it derandomized, so runs repeat exactly).
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any, Final

import msgpack
from hypothesis import strategies as st

from protocol.apis import APIS, ApiKey
from protocol.codec import MAX_STRING_BYTES, RequestHeader, encode_request
from protocol.compression import SUPPORTED, Compression
from protocol.framing import frame
from protocol.records import CRC_START, Record, build_batch, crc32c
from protocol.schema import (
    BoolType,
    BytesType,
    FloatType,
    IntType,
    IntWire,
    ListType,
    NullableType,
    StrType,
    StructType,
    WireType,
    encode_struct,
)
from tests.integration.fuzz_frames import (
    crafted_batches,
    full_requests,
    mutated_inputs,
    wrong_type_inputs,
)

__all__ = ["SEEDED_TOPIC", "decoder_inputs", "handler_inputs"]

SEEDED_TOPIC: Final = "t"  # the topic the fuzzed broker holds data of (tests/fuzz/harness.py)
_NOW_MS: Final = 1_700_000_000_000


def _edges(bits: int) -> list[int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return [0, 1, 2, 3, 7, 99, -1, -2, -3, -4, -7, low, low + 1, high, high - 1]


def _ints(int_type: IntType) -> st.SearchStrategy[int]:
    return st.sampled_from(_edges(int_type.bits)) | st.integers(int_type.min, int_type.max)


_NAMES: Final = st.sampled_from(
    [
        SEEDED_TOPIC,
        "f",  # the topic the fuzzed broker follows
        "fuzz-absent",
        "",
        ".",
        "..",
        "a/b",
        "ünïcödé",
        "\x00",
        "x" * 249,
        "x" * 250,
        "x" * MAX_STRING_BYTES,
    ]
) | st.text(max_size=12)


_RECORDS: Final = st.lists(
    st.builds(
        Record,
        value=st.none() | st.binary(max_size=40),
        key=st.none() | st.binary(max_size=8),
        timestamp_ms=st.integers(0, 2**45) | st.just(-1),
        headers=st.lists(
            st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2
        ).map(tuple),
    ),
    min_size=1,
    max_size=8,
)
_CODECS: Final = st.sampled_from(sorted(SUPPORTED))


@st.composite
def _built_batch(draw: st.DrawFn) -> bytes:
    """A batch a producer could send, maybe idempotent; or it with one byte set and the CRC
    made right again (damage only the leader's records check can see)."""
    records = draw(_RECORDS)
    idempotent = draw(st.booleans())
    batch = build_batch(
        records,
        compression=Compression(draw(_CODECS)),
        producer_id=draw(st.integers(0, 10)) if idempotent else -1,
        producer_epoch=draw(st.integers(0, 2)) if idempotent else -1,
        base_sequence=draw(st.integers(0, 20)) if idempotent else -1,
        now_ms=_NOW_MS,
    )
    if draw(st.integers(0, 2)) == 0:
        out = bytearray(batch)
        at = draw(st.integers(CRC_START, len(out) - 1))
        out[at] = draw(st.integers(0, 255))
        struct.pack_into(">I", out, 17, crc32c(bytes(out[CRC_START:])))
        batch = bytes(out)
    return batch


def _records_values() -> st.SearchStrategy[bytes]:
    crafted = st.sampled_from(sorted(crafted_batches().values()))
    joined = st.lists(_built_batch(), min_size=2, max_size=3).map(b"".join)
    return st.one_of(crafted, _built_batch(), joined, st.binary(max_size=80))


def _value(wire: WireType) -> st.SearchStrategy[Any]:
    if isinstance(wire, IntWire):
        return _ints(wire.int_type)
    if isinstance(wire, BoolType):
        return st.booleans()
    if isinstance(wire, FloatType):  # a quota's value: NaN, infinities and negatives too
        return st.floats()
    if isinstance(wire, StrType):
        return _NAMES
    if isinstance(wire, BytesType):
        return _records_values()
    if isinstance(wire, NullableType):
        return st.none() | _value(wire.inner)
    if isinstance(wire, ListType):
        return st.lists(_value(wire.inner), max_size=3).map(tuple)
    if isinstance(wire, StructType):
        cls = wire.cls
        fields = {f.name: _field_value(f.name, f.wire) for f in wire.fields}
        return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))
    raise TypeError(f"no strategy for {wire!r}: teach tests/fuzz/targets.py")


_TOPIC_FIELDS: Final = frozenset({"name", "topic", "topic_name"})
_PARTITION_FIELDS: Final = frozenset({"index", "partition", "partition_index"})


def _field_value(name: str, wire: WireType) -> st.SearchStrategy[Any]:
    """As `_value`, but a topic or partition field names the seeded partitions, and `acks`
    is valid, three times in four, so that requests reach the broker's logs rather than
    UNKNOWN_TOPIC_OR_PARTITION or INVALID_REQUIRED_ACKS."""
    if name in _TOPIC_FIELDS and isinstance(wire, StrType):
        return _mostly(st.just(SEEDED_TOPIC), _value(wire))
    if name in _PARTITION_FIELDS and isinstance(wire, IntWire):
        return _mostly(st.sampled_from([0, 1]), _value(wire))
    if name == "acks" and isinstance(wire, IntWire):
        return _mostly(st.sampled_from([-1, 0, 1]), _value(wire))
    return _value(wire)


def _mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` three times in four."""
    return st.integers(0, 3).flatmap(lambda n: other if n == 0 else usual)


@cache
def handler_inputs(key: ApiKey) -> st.SearchStrategy[tuple[RequestHeader, Any]]:
    """(header, body) of requests of `key` at any of its versions that encode (so decode)."""
    spec = APIS[key]
    by_version = [
        st.tuples(
            st.builds(
                RequestHeader,
                st.just(key),
                st.just(version),
                _ints(IntType(32)),
                st.none() | _NAMES,
            ),
            _value(StructType(spec.request, version)),
        )
        for version in range(spec.min_version, spec.max_version + 1)
    ]
    return st.one_of(by_version)


@cache
def decoder_inputs(key: ApiKey) -> st.SearchStrategy[bytes]:
    """The bytes of one connection whose frames claim to be `key` requests."""
    seeds = [(h, b) for h, b in full_requests() if h.api_key == key]
    spec = APIS[key]

    def headed(version: int, body: dict[str, Any]) -> bytes:
        header = encode_struct(RequestHeader(key, version, 1, "fuzz"), 0)
        packed: bytes = msgpack.packb([header, body], use_bin_type=True)
        return frame(packed)

    random_body = st.builds(
        headed,
        st.integers(spec.min_version - 1, spec.max_version + 1),
        st.dictionaries(
            st.text(max_size=8),
            st.none() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=8),
            max_size=6,
        ),
    )
    nonsense = handler_inputs(key).map(lambda hb: encode_request(hb[0], hb[1]))
    return st.one_of(
        mutated_inputs(seeds).map(lambda i: i.data),
        wrong_type_inputs(seeds).map(lambda i: i.data),
        random_body,
        nonsense,
    )
