"""Every message of every supported version survives encode -> frame -> decode unchanged."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import msgpack
import pytest
from hypothesis import given

from protocol.apis import APIS, ApiKey, ApiSpec, api_key_of, supported_versions
from protocol.codec import (
    Request,
    RequestHeader,
    Response,
    ResponseHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    UnsupportedVersionError,
)
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages.api_versions import ApiVersionRange, ApiVersionsResponse
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.metadata import MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopicResult,
)
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.schema import (
    MAX_STRING_BYTES,
    BoolType,
    BytesType,
    FloatType,
    Int32,
    IntWire,
    ListType,
    MaxItems,
    NullableType,
    StrType,
    StructType,
    WireType,
    decode_struct,
    encode_struct,
    struct_fields,
)
from tests.unit.protocol.strategies import (
    ALL_FIELDS,
    FAST,
    api_version_id,
    api_versions,
    project,
    struct_strategy,
    wire_strategy,
)

CASES = [
    pytest.param(spec, version, id=api_version_id((spec, version)))
    for spec, version in api_versions()
]

_HEADER_WIRES = {f.name: f.wire for f in struct_fields(RequestHeader, 0)}
CORRELATION_IDS = wire_strategy(_HEADER_WIRES["correlation_id"])
CLIENT_IDS = wire_strategy(_HEADER_WIRES["client_id"])


def _only_frame(data: bytes) -> bytes:
    """Run a complete encoded frame through a FrameDecoder; exactly one frame must come out."""
    decoder = FrameDecoder()
    decoder.receive_data(data)
    body = decoder.next_frame()
    assert isinstance(body, bytes)
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered_bytes == 0
    return body


# ---------------------------------------------------------------------------------------------
# The API table itself.


def test_every_api_key_is_in_the_table_with_a_sane_version_range() -> None:
    assert set(APIS) == set(ApiKey)
    for key, spec in APIS.items():
        assert spec.key == key
        assert 0 <= spec.min_version <= spec.max_version
        assert dataclasses.is_dataclass(spec.request)
        assert dataclasses.is_dataclass(spec.response)
    assert {r.api_key for r in supported_versions()} == {int(k) for k in ApiKey}
    assert {(r.api_key, r.min_version, r.max_version) for r in supported_versions()} == {
        (key, spec.min_version, spec.max_version) for key, spec in APIS.items()
    }
    for key, spec in APIS.items():
        assert api_key_of(spec.request) == key
    for not_a_request in (spec.response, int, ApiSpec):
        with pytest.raises(TypeError, match="is not a request type"):
            api_key_of(not_a_request)


def test_message_modules_are_imported_when_first_used() -> None:
    """A client process pays only for the APIs it speaks (see protocol.apis)."""
    script = (
        "import sys, protocol.apis as apis\n"
        "def loaded():\n"
        "    return sorted(m for m in sys.modules if m.startswith('protocol.messages.'))\n"
        "print(loaded())\n"
        "apis.api_spec(apis.ApiKey.FETCH)\n"
        "print(loaded())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "['protocol.messages.api_versions']",
        "['protocol.messages.api_versions', 'protocol.messages.fetch']",
    ]


def test_cases_cover_every_version_of_every_api() -> None:
    expected = sum(spec.max_version - spec.min_version + 1 for spec in APIS.values())
    assert len(CASES) == expected
    assert len(CASES) > len(APIS)  # some API has more than one version


def _wire_types(wire: WireType) -> set[type]:
    kinds: set[type] = {type(wire)}
    if isinstance(wire, NullableType | ListType):
        kinds |= _wire_types(wire.inner)
    elif isinstance(wire, StructType):
        for f in wire.fields:
            kinds |= _wire_types(f.wire)
    return kinds


def test_schemas_use_every_wire_type_the_strategies_know() -> None:
    # If the schemas stopped using a wire type, the round trips would quietly test less.
    kinds: set[type] = set()
    for spec, version in api_versions():
        kinds |= _wire_types(StructType(spec.request, version))
        kinds |= _wire_types(StructType(spec.response, version))
    assert kinds == {
        IntWire,
        BoolType,
        FloatType,
        StrType,
        BytesType,
        NullableType,
        ListType,
        StructType,
    }


# ---------------------------------------------------------------------------------------------
# Round trips.


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_request_round_trip(spec: ApiSpec, version: int) -> None:
    @FAST
    @given(
        correlation_id=CORRELATION_IDS,
        client_id=CLIENT_IDS,
        body=struct_strategy(spec.request, version),
    )
    def check(correlation_id: int, client_id: str | None, body: Any) -> None:
        header = RequestHeader(spec.key, version, correlation_id, client_id)
        encoded = encode_request(header, body)
        decoded = decode_request(_only_frame(encoded))
        assert decoded == Request(header, body)
        assert type(decoded.body) is spec.request
        # Deterministic: decoding then re-encoding gives the same bytes.
        assert encode_request(decoded.header, decoded.body) == encoded

    check()


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_response_round_trip(spec: ApiSpec, version: int) -> None:
    @FAST
    @given(correlation_id=CORRELATION_IDS, body=struct_strategy(spec.response, version))
    def check(correlation_id: int, body: Any) -> None:
        encoded = encode_response(correlation_id, spec.key, version, body)
        decoded = decode_response(_only_frame(encoded), spec.key, version)
        assert decoded == Response(ResponseHeader(correlation_id), body)
        assert type(decoded.body) is spec.response
        assert encode_response(correlation_id, spec.key, version, decoded.body) == encoded

    check()


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_fields_newer_than_the_version_fall_back_to_defaults(spec: ApiSpec, version: int) -> None:
    """Values built with every field set lose exactly the fields the version lacks."""

    @FAST
    @given(
        request=struct_strategy(spec.request, ALL_FIELDS),
        response=struct_strategy(spec.response, ALL_FIELDS),
    )
    def check(request: Any, response: Any) -> None:
        header = RequestHeader(spec.key, version, 7, "gating")
        decoded = decode_request(_only_frame(encode_request(header, request)))
        assert decoded.body == project(request, StructType(spec.request, version))
        raw = encode_response(1, spec.key, version, response)
        decoded_response = decode_response(_only_frame(raw), spec.key, version)
        assert decoded_response.body == project(response, StructType(spec.response, version))

    check()


def test_client_id_and_correlation_id_extremes_round_trip() -> None:
    for correlation_id in (-(2**31), 0, 2**31 - 1):
        for client_id in (None, "", "é-клиент-🚀"):
            header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, client_id)
            body = APIS[ApiKey.API_VERSIONS].request()
            assert decode_request(_only_frame(encode_request(header, body))).header == header


# ---------------------------------------------------------------------------------------------
# Version gating.


def _partition_result_maps(raw_frame: bytes) -> list[dict[str, Any]]:
    _header, body = msgpack.unpackb(raw_frame[4:], raw=False)
    return [p for topic in body["topics"] for p in topic["partitions"]]


def test_offset_for_leader_epoch_leader_epoch_exists_only_from_v1() -> None:
    names_v0 = [f.name for f in struct_fields(OffsetForLeaderEpochPartitionResult, 0)]
    names_v1 = [f.name for f in struct_fields(OffsetForLeaderEpochPartitionResult, 1)]
    assert names_v0 == ["error_code", "partition", "end_offset"]
    assert names_v1 == ["error_code", "partition", "end_offset", "leader_epoch"]
    assert {f.name: f.since for f in struct_fields(OffsetForLeaderEpochPartitionResult, 1)}[
        "leader_epoch"
    ] == 1

    result = OffsetForLeaderEpochPartitionResult(
        error_code=0, partition=3, end_offset=1234, leader_epoch=7
    )
    response = OffsetForLeaderEpochResponse(
        topics=(OffsetForLeaderEpochTopicResult("t", (result,)),), throttle_time_ms=5
    )
    key = ApiKey.OFFSET_FOR_LEADER_EPOCH

    v0 = encode_response(9, key, 0, response)
    assert _partition_result_maps(v0) == [{"error_code": 0, "partition": 3, "end_offset": 1234}]
    decoded_v0 = decode_response(v0[4:], key, 0).body
    (decoded_result,) = decoded_v0.topics[0].partitions
    assert decoded_result.leader_epoch == -1  # the default: v0 never carried it
    assert decoded_result.end_offset == 1234
    assert decoded_result == dataclasses.replace(result, leader_epoch=-1)

    v1 = encode_response(9, key, 1, response)
    assert _partition_result_maps(v1)[0]["leader_epoch"] == 7
    assert decode_response(v1[4:], key, 1).body == response


def test_version_gated_field_is_rejected_in_an_older_version_and_required_in_a_newer_one() -> None:
    key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    v0_map = {"error_code": 0, "partition": 1, "end_offset": 5}
    v1_map = {**v0_map, "leader_epoch": 2}

    def frame_body(partition: dict[str, Any]) -> bytes:
        body = {"topics": [{"topic": "t", "partitions": [partition]}], "throttle_time_ms": 0}
        packed: bytes = msgpack.packb([{"correlation_id": 1}, body], use_bin_type=True)
        return packed

    assert decode_response(frame_body(v0_map), key, 0).body.topics[0].partitions[0].end_offset == 5
    assert (
        decode_response(frame_body(v1_map), key, 1).body.topics[0].partitions[0].leader_epoch == 2
    )
    with pytest.raises(InvalidRequestError, match="unexpected 'leader_epoch'") as too_new:
        decode_response(frame_body(v1_map), key, 0)
    assert too_new.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(InvalidRequestError, match="missing leader_epoch") as too_old:
        decode_response(frame_body(v0_map), key, 1)
    assert too_old.value.code == ErrorCode.INVALID_REQUEST


def test_metadata_controller_epoch_is_gated_at_v1() -> None:
    response = MetadataResponse(
        brokers=(), cluster_id="c", controller_id=1, topics=(), controller_epoch=42
    )
    key = ApiKey.METADATA
    v0 = encode_response(1, key, 0, response)
    assert "controller_epoch" not in msgpack.unpackb(v0[4:], raw=False)[1]
    assert decode_response(v0[4:], key, 0).body.controller_epoch == -1
    assert decode_response(encode_response(1, key, 1, response)[4:], key, 1).body == response


# ---------------------------------------------------------------------------------------------
# The encoder validates too: a bad value never reaches the wire.


def _produce(index: int = 0, records: Any = b"x", acks: Any = 1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=1000,
        topic_data=(ProduceTopicData("t", (ProducePartitionData(index, records),)),),
    )


def test_encode_request_rejects_the_wrong_body_type() -> None:
    with pytest.raises(TypeError, match="ProduceRequest"):
        encode_request(RequestHeader(ApiKey.PRODUCE, 0, 1), ApiVersionsResponse(0, ()))


@pytest.mark.parametrize(
    ("api_key", "version"), [(ApiKey.PRODUCE, 1), (ApiKey.METADATA, 3), (ApiKey.FETCH, -1)]
)
def test_encode_request_rejects_unsupported_versions(api_key: ApiKey, version: int) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        encode_request(RequestHeader(api_key, version, 1), _produce())
    assert info.value.code == 35
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION


def test_encode_request_rejects_unknown_api_keys() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        encode_request(RequestHeader(99, 0, 1), _produce())
    assert info.value.code == 35


@pytest.mark.parametrize(
    ("request_", "path"),
    [
        (_produce(index=2**31), "topic_data[0].partition_data[0].index"),
        (_produce(index=True), "topic_data[0].partition_data[0].index"),
        (_produce(records="text"), "topic_data[0].partition_data[0].records"),
        (_produce(acks=2**15), "acks"),
        (_produce(acks=None), "acks"),
    ],
)
def test_encode_request_rejects_bad_field_values(request_: ProduceRequest, path: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        encode_request(RequestHeader(ApiKey.PRODUCE, 0, 1), request_)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert f"field {path}:" in info.value.message


def test_encode_response_rejects_bad_values_and_types() -> None:
    key = ApiKey.API_VERSIONS
    with pytest.raises(InvalidRequestError, match=r"api_keys\[0\]\.max_version"):
        encode_response(1, key, 0, ApiVersionsResponse(0, (ApiVersionRange(0, 0, 2**15),)))
    with pytest.raises(TypeError, match="ApiVersionsResponse"):
        encode_response(1, key, 0, _produce())
    with pytest.raises(InvalidRequestError, match="correlation_id"):
        encode_response(2**31, key, 0, ApiVersionsResponse(0, ()))


def test_int_enums_encode_as_plain_ints() -> None:
    # supported_versions() holds ApiKey members and brokers put ErrorCode members in error_code
    # fields: both must encode (as plain ints) and decode back equal.
    key = ApiKey.API_VERSIONS
    response = ApiVersionsResponse(ErrorCode.UNSUPPORTED_VERSION, supported_versions())
    raw = encode_response(3, key, 0, response)
    plain = msgpack.unpackb(raw[4:], raw=False)[1]
    assert plain["error_code"] == 35
    assert [r["api_key"] for r in plain["api_keys"]] == [int(k) for k in APIS]
    decoded = decode_response(raw[4:], key, 0).body
    assert decoded == response
    assert type(decoded.error_code) is int
    assert type(decoded.api_keys[0].api_key) is int

    header = RequestHeader(ApiKey.METADATA, 1, 5)
    request = decode_request(encode_request(header, APIS[ApiKey.METADATA].request(None))[4:])
    assert request.header == header
    assert type(request.header.api_key) is int


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("x" * MAX_STRING_BYTES, True),
        ("x" * (MAX_STRING_BYTES + 1), False),
        ("é" * (MAX_STRING_BYTES // 2), True),  # 32766 bytes
        ("é" * (MAX_STRING_BYTES // 2 + 1), False),  # 16384 characters, 32768 bytes
        ("🚀" * (MAX_STRING_BYTES // 4), True),  # 32764 bytes
        ("🚀" * (MAX_STRING_BYTES // 4 + 1), False),  # 8192 characters, 32768 bytes
    ],
    ids=[
        "ascii-at-limit",
        "ascii-over",
        "2-byte-at-limit",
        "2-byte-over",
        "4-byte-ok",
        "4-byte-over",
    ],
)
def test_encoder_enforces_the_same_string_byte_limit_as_the_decoder(name: str, ok: bool) -> None:
    assert MAX_STRING_BYTES == 32767
    header = RequestHeader(ApiKey.DELETE_TOPICS, 0, 1)
    request = DeleteTopicsRequest(topic_names=("a", name), timeout_ms=1)
    if ok:
        assert decode_request(_only_frame(encode_request(header, request))).body == request
    else:
        with pytest.raises(InvalidRequestError) as info:
            encode_request(header, request)
        assert info.value.code == ErrorCode.INVALID_REQUEST
        assert f"field topic_names[1]: longer than {MAX_STRING_BYTES} bytes" in info.value.message


@dataclass(frozen=True, slots=True)
class _Limited:
    items: Annotated[tuple[Int32, ...], MaxItems(2)]


def test_max_items_bounds_a_list_on_both_sides() -> None:
    (field,) = struct_fields(_Limited, 0)
    assert isinstance(field.wire, ListType)
    assert field.wire.max_items == 2
    assert encode_struct(_Limited((1, 2)), 0) == {"items": [1, 2]}
    assert decode_struct(_Limited, 0, {"items": [1, 2]}) == _Limited((1, 2))
    with pytest.raises(InvalidRequestError, match="field items: 3 items, more than the limit 2"):
        encode_struct(_Limited((1, 2, 3)), 0)
    with pytest.raises(InvalidRequestError, match="field items: 3 items, more than the limit 2"):
        decode_struct(_Limited, 0, {"items": [1, 2, 3]})
