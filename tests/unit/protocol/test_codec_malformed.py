"""decode_request on hostile or broken frame bodies: always a coded HighwaterError, never a crash.

INVALID_REQUEST (42) for anything malformed, UNSUPPORTED_VERSION (35) for an unknown api key or
version. RequestDecodeError.header is set exactly when the header itself decoded.
"""

from __future__ import annotations

import copy
import time
import tracemalloc
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.apis import ApiKey, ApiSpec
from protocol.codec import (
    MAX_MAP_ENTRIES,
    MAX_STRING_BYTES,
    RequestDecodeError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol.errors import (
    ErrorCode,
    HighwaterError,
    InvalidRequestError,
    UnsupportedVersionError,
)
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.schema import (
    MAX_ITEMS_DEFAULT,
    BoolType,
    BytesType,
    FloatType,
    IntWire,
    ListType,
    NullableType,
    StrType,
    StructType,
    WireType,
    encode_struct,
)
from tests.unit.protocol.strategies import (
    FAST,
    THOROUGH,
    api_version_id,
    api_versions,
    struct_strategy,
)

INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35

HEADER = RequestHeader(ApiKey.CREATE_TOPICS, 0, 77, "client-1")
BODY = CreateTopicsRequest(
    topics=(
        CreatableTopic(
            name="orders",
            num_partitions=2,
            replication_factor=3,
            assignments=(CreatableReplicaAssignment(0, (1, 2, 3)),),
            configs=(CreatableTopicConfig("retention.ms", None),),
        ),
    ),
    timeout_ms=5000,
)


def pack(obj: Any) -> bytes:
    packed: bytes = msgpack.packb(obj, use_bin_type=True)
    return packed


def header_map(**changes: Any) -> dict[Any, Any]:
    plain: dict[Any, Any] = encode_struct(HEADER, 0)
    plain.update(changes)
    return plain


def body_map() -> dict[str, Any]:
    return encode_struct(BODY, 0)


VALID = pack([header_map(), body_map()])


def decode_error(frame_body: bytes) -> RequestDecodeError:
    with pytest.raises(RequestDecodeError) as info:
        decode_request(frame_body)
    err = info.value
    assert isinstance(err, InvalidRequestError)
    assert isinstance(err, HighwaterError)
    assert isinstance(err.__cause__, HighwaterError)
    assert err.message == err.__cause__.message
    assert err.code == err.__cause__.code
    return err


def assert_invalid(frame_body: bytes, header: RequestHeader | None) -> RequestDecodeError:
    err = decode_error(frame_body)
    assert err.code == INVALID_REQUEST
    assert err.code is ErrorCode.INVALID_REQUEST
    assert err.header == header
    return err


def test_the_unmutated_request_decodes() -> None:
    # Every test below changes one thing in this frame body; it must be valid to begin with.
    request = decode_request(VALID)
    assert request.header == HEADER
    assert request.body == BODY
    assert encode_request(HEADER, BODY)[4:] == VALID


# ---------------------------------------------------------------------------------------------
# Not msgpack, or not [header, body].


def test_every_truncation_is_invalid_with_no_header() -> None:
    for cut in range(len(VALID)):
        err = assert_invalid(VALID[:cut], header=None)
        assert "malformed msgpack" in err.message


@pytest.mark.parametrize("extra", [b"\xc0", b"\x00", b"\x92\x80\x80", VALID])
def test_trailing_bytes_are_invalid(extra: bytes) -> None:
    err = assert_invalid(VALID + extra, header=None)
    assert "trailing bytes" in err.message


@pytest.mark.parametrize(
    "plain",
    [{"header": 1}, 1, "frame", None, b"frame", True, 1.5],
    ids=["map", "int", "str", "nil", "bin", "bool", "float"],
)
def test_frame_body_that_is_not_an_array_is_invalid(plain: Any) -> None:
    err = assert_invalid(pack(plain), header=None)
    assert "[header, body]" in err.message


@pytest.mark.parametrize("items", [0, 1, 3])
def test_array_of_the_wrong_length_is_invalid(items: int) -> None:
    plain = [header_map(), body_map(), {}][:items]
    err = assert_invalid(pack(plain), header=None)
    assert "[header, body]" in err.message


# ---------------------------------------------------------------------------------------------
# Header errors: header stays None.


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        (header_map(api_key="19"), "field api_key: expected int16, got str"),
        (header_map(api_key=70000), "field api_key: 70000 out of range for int16"),
        (header_map(api_key=-32769), "out of range for int16"),
        (header_map(api_version=True), "field api_version: expected int16, got bool"),
        (header_map(correlation_id=2**31), "out of range for int32"),
        (header_map(correlation_id=1.0), "field correlation_id: expected int32, got float"),
        (header_map(client_id=b"bin"), "field client_id: expected str, got bytes"),
        (header_map(client_id=5), "field client_id: expected str, got int"),
        ({"api_key": 19, "api_version": 0, "client_id": None}, "missing correlation_id"),
        (header_map(tenant="x"), "unexpected 'tenant'"),
        ({**header_map(), b"api_key": 19}, "unexpected b'api_key'"),
        ([19, 0, 77, None], "field RequestHeader: expected map, got list"),
        (None, "expected map, got NoneType"),
    ],
)
def test_bad_header_is_invalid_with_no_header(header: Any, needle: str) -> None:
    err = assert_invalid(pack([header, body_map()]), header=None)
    assert needle in err.message


def test_bytes_keys_in_place_of_str_keys_are_not_field_names() -> None:
    plain = {k.encode(): v for k, v in header_map().items()}
    err = assert_invalid(pack([plain, body_map()]), header=None)
    assert "missing api_key, api_version, client_id, correlation_id" in err.message


# ---------------------------------------------------------------------------------------------
# Body errors: the header was fine, so it is reported (the broker answers with its correlation id).


def _body_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    plain = body_map()
    target: Any = plain
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return plain


def _body_without(path: tuple[Any, ...]) -> dict[str, Any]:
    plain = body_map()
    target: Any = plain
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return plain


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (_body_with(("timeout_ms",), "5000"), "field timeout_ms: expected int32, got str"),
        (
            _body_with(("topics", 0, "replication_factor"), 70000),
            "field topics[0].replication_factor: 70000 out of range for int16",
        ),
        (_body_with(("timeout_ms",), True), "field timeout_ms: expected int32, got bool"),
        (_body_with(("timeout_ms",), 2**63), "out of range for int32"),
        (_body_with(("validate_only",), 1), "field validate_only: expected bool, got int"),
        (_body_with(("topics",), {"name": "x"}), "field topics: expected array, got dict"),
        (_body_with(("topics", 0, "name"), b"orders"), "field topics[0].name: expected str"),
        (
            _body_with(("topics", 0, "assignments", 0, "broker_ids", 1), "2"),
            "field topics[0].assignments[0].broker_ids[1]: expected int32, got str",
        ),
        (
            _body_with(("topics", 0, "configs", 0, "value"), 5),
            "field topics[0].configs[0].value: expected str, got int",
        ),
        (_body_without(("timeout_ms",)), "CreateTopicsRequest (v0): missing timeout_ms"),
        (
            _body_without(("topics", 0, "num_partitions")),
            "topics[0] (v0): missing num_partitions",
        ),
        (_body_with(("bogus",), 1), "CreateTopicsRequest (v0): unexpected 'bogus'"),
        (
            _body_with(("topics", 0, "configs", 0, "extra"), None),
            "topics[0].configs[0] (v0): unexpected 'extra'",
        ),
        (None, "field CreateTopicsRequest: expected map, got NoneType"),
        ([], "field CreateTopicsRequest: expected map, got list"),
    ],
)
def test_bad_body_is_invalid_and_keeps_the_header(body: Any, needle: str) -> None:
    err = assert_invalid(pack([header_map(), body]), header=HEADER)
    assert needle in err.message


# ---------------------------------------------------------------------------------------------
# Unknown api keys and versions: UNSUPPORTED_VERSION, with the header.


@pytest.mark.parametrize("api_key", [99, 11, -1, 32767, -32768])
def test_unknown_api_key_is_unsupported_version(api_key: int) -> None:
    # The body is not even looked at: any body gives the same answer.
    for body in (body_map(), {}, None):
        err = decode_error(pack([header_map(api_key=api_key), body]))
        assert err.code == UNSUPPORTED_VERSION
        assert err.code is ErrorCode.UNSUPPORTED_VERSION
        assert err.header == RequestHeader(api_key, 0, 77, "client-1")
        assert f"unknown api key {api_key}" in err.message


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ApiKey.CREATE_TOPICS, 1),
        (ApiKey.CREATE_TOPICS, -1),
        (ApiKey.METADATA, 3),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2),
        (ApiKey.PRODUCE, 32767),
    ],
)
def test_unsupported_version_is_unsupported_version(api_key: ApiKey, version: int) -> None:
    for body in (body_map(), {}, None):
        err = decode_error(pack([header_map(api_key=int(api_key), api_version=version), body]))
        assert err.code == UNSUPPORTED_VERSION
        assert err.header == RequestHeader(api_key, version, 77, "client-1")
        assert f"{api_key.name} v{version} not supported" in err.message


# ---------------------------------------------------------------------------------------------
# msgpack features the protocol does not use, and sizes it must not trust.


@pytest.mark.parametrize(
    "ext",
    [
        pack(msgpack.ExtType(5, b"abc")),
        pack(msgpack.ExtType(5, b"")),
        pack(msgpack.ExtType(127, b"x" * 20)),
        b"\xd4\x80\x00",  # fixext1, type -128
        b"\xc7\x00\x80",  # ext8 of no bytes, type -128
        pack(msgpack.Timestamp(1, 0)),
    ],
    ids=["ext5", "ext5-empty", "ext127", "fixext1-neg", "ext-neg-empty", "timestamp"],
)
def test_msgpack_ext_types_are_invalid(ext: bytes) -> None:
    # client_id and validate_only are the last entries of their maps, so they can be swapped out.
    header_without_client_id = pack(header_map(client_id=None))[:-1]
    body_without_validate_only = pack(body_map())[:-1]
    assert header_without_client_id + b"\xc0" == pack(header_map(client_id=None))
    for frame_body in (
        b"\x92" + header_without_client_id + ext + pack(body_map()),
        b"\x92" + pack(header_map()) + body_without_validate_only + ext,
        ext,
    ):
        err = assert_invalid(frame_body, header=None)
        assert "ext" in err.message


def test_empty_timestamp_ext_is_invalid() -> None:
    # ext type -1 with no data: msgpack's own timestamp decoder rejects it.
    err = assert_invalid(b"\x92" + pack(header_map()) + b"\xc7\x00\xff", header=None)
    assert "malformed msgpack" in err.message


@pytest.mark.parametrize(
    "declaration",
    [
        b"\xdd\xff\xff\xff\xff",  # array32 of 4 G items
        b"\xdf\xff\xff\xff\xff",  # map32 of 4 G pairs
        b"\xdb\xff\xff\xff\xff",  # str32 of 4 GiB
        b"\xc6\xff\xff\xff\xff",  # bin32 of 4 GiB
        b"\xdc\xff\xff",  # array16 of 65535 items
        b"\xde\xff\xff",  # map16 of 65535 pairs
        b"\xda\xff\xff",  # str16 of 64 KiB
        b"\xc5\xff\xff",  # bin16 of 64 KiB
        b"\xc9\xff\xff\xff\xff\x05",  # ext32 of 4 GiB
    ],
    ids=["array32", "map32", "str32", "bin32", "array16", "map16", "str16", "bin16", "ext32"],
)
def test_small_frame_declaring_a_huge_object_fails_fast_without_allocating(
    declaration: bytes,
) -> None:
    for frame_body in (
        declaration,
        declaration + b"\x00" * 64,
        b"\x92" + pack(header_map()) + declaration,
        b"\x92\x84\xa7api_key" + declaration,
    ):
        tracemalloc.start()
        started = time.perf_counter()
        try:
            err = assert_invalid(frame_body, header=None)
            elapsed = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert "malformed msgpack" in err.message
        assert elapsed < 0.5
        assert peak < 1024 * 1024


def test_array_longer_than_the_frame_could_hold_is_rejected_by_its_declaration() -> None:
    # 1000 declared items in a 10-byte body: the bound is checked before the items are read.
    err = assert_invalid(b"\xdc\x03\xe8" + b"\xc0" * 7, header=None)
    assert "exceeds max_array_len" in err.message


@pytest.mark.parametrize("depth", [2000, 100_000])
def test_deep_nesting_is_invalid(depth: int) -> None:
    started = time.perf_counter()
    for frame_body in (
        b"\x91" * depth + b"\xc0",
        b"\x92" + pack(header_map()) + b"\x81\xa6topics" + b"\x91" * depth + b"\xc0",
    ):
        err = assert_invalid(frame_body, header=None)
        assert "malformed msgpack" in err.message
    assert time.perf_counter() - started < 2


def test_string_length_limit_is_kafkas_int16() -> None:
    assert MAX_STRING_BYTES == 32767
    at_limit = pack([header_map(client_id="x" * MAX_STRING_BYTES), body_map()])
    assert decode_request(at_limit).header.client_id == "x" * MAX_STRING_BYTES
    over = pack([header_map(client_id="x" * (MAX_STRING_BYTES + 1)), body_map()])
    err = assert_invalid(over, header=None)
    assert "max_str_len" in err.message


def test_maps_larger_than_any_schema_are_invalid() -> None:
    big = {f"k{i}": i for i in range(MAX_MAP_ENTRIES + 1)}
    err = assert_invalid(pack([header_map(), big]), header=None)
    assert "max_map_len" in err.message
    # One entry below the bound is parsed, then rejected by the schema (so the header is known).
    small = {f"k{i}": i for i in range(MAX_MAP_ENTRIES)}
    err = assert_invalid(pack([header_map(), small]), header=HEADER)
    assert "unexpected" in err.message


@pytest.mark.parametrize(
    "frame_body",
    [
        b"\x92" + pack(header_map())[:-9] + b"\xa8client-\xff" + pack(body_map()),
        b"\x92\x81\xa2\xff\xfe\x01\x80",
    ],
    ids=["value", "key"],
)
def test_invalid_utf8_is_invalid(frame_body: bytes) -> None:
    err = assert_invalid(frame_body, header=None)
    assert "malformed msgpack" in err.message


@pytest.mark.parametrize("key", [1, None, 1.5], ids=["int", "nil", "float"])
def test_non_string_map_keys_are_invalid(key: Any) -> None:
    frame_body = b"\x92" + pack({key: 1}) + pack(body_map())
    err = assert_invalid(frame_body, header=None)
    assert "malformed msgpack" in err.message


# ---------------------------------------------------------------------------------------------
# Generic strictness over every schema: corrupt one value anywhere, get INVALID_REQUEST naming it.

MUTATION_CASES = [
    pytest.param(spec, version, id=api_version_id((spec, version)))
    for spec, version in api_versions()
]


def _bad_values(wire: WireType) -> list[Any]:
    """Values of the wrong msgpack type (or range) for `wire`."""
    if isinstance(wire, IntWire):
        bad: list[Any] = ["1", True, 1.5, None, b"\x01", [1], wire.int_type.max + 1]
        if wire.int_type.bits < 64:  # msgpack cannot carry an int below -2**63
            bad.append(wire.int_type.min - 1)
        return bad
    if isinstance(wire, BoolType):
        return [0, 1, "true", None, 1.0]
    if isinstance(wire, FloatType):
        return [1, True, "1.0", None, b"\x01", [1.0]]  # an int is not a float64 on the wire
    if isinstance(wire, StrType):
        return [b"x", 1, None, ["x"]]
    if isinstance(wire, BytesType):
        return ["x", 1, None, [1]]
    if isinstance(wire, NullableType):
        return [v for v in _bad_values(wire.inner) if v is not None]
    if isinstance(wire, ListType):
        return [{"a": 1}, "x", 1, None]
    if isinstance(wire, StructType):
        return ["x", 1, None, [], True]
    raise TypeError(wire)


def _sites(
    wire: WireType, plain: Any, path: tuple[Any, ...]
) -> list[tuple[tuple[Any, ...], WireType]]:
    out = [(path, wire)]
    if isinstance(wire, NullableType) and plain is not None:
        # The nullable value itself is the site; descend only into what the inner type holds.
        out.extend(_sites(wire.inner, plain, path)[1:])
    elif isinstance(wire, ListType):
        for i, item in enumerate(plain):
            out.extend(_sites(wire.inner, item, (*path, i)))
    elif isinstance(wire, StructType):
        for f in wire.fields:
            out.extend(_sites(f.wire, plain[f.name], (*path, f.name)))
    return out


def _path_str(path: tuple[Any, ...]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


def _replace(plain: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = plain
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return plain


def _get(plain: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        plain = plain[key]
    return plain


@pytest.mark.parametrize(("spec", "version"), MUTATION_CASES)
def test_any_wrong_value_anywhere_is_invalid_and_named(spec: ApiSpec, version: int) -> None:
    header = RequestHeader(spec.key, version, 12345, None)
    wire = StructType(spec.request, version)

    @FAST
    @given(body=struct_strategy(spec.request, version), data=st.data())
    def check(body: Any, data: st.DataObject) -> None:
        plain = encode_struct(body, version)
        path, site_wire = data.draw(st.sampled_from(_sites(wire, plain, ())))
        where = _path_str(path)
        kinds = ["wrong-value"]
        if isinstance(site_wire, StructType | NullableType) and isinstance(_get(plain, path), dict):
            kinds.append("extra-field")
            if _get(plain, path):
                kinds.append("missing-field")
        kind = data.draw(st.sampled_from(kinds))
        mutated = copy.deepcopy(plain)
        if kind == "wrong-value":
            bad = data.draw(st.sampled_from(_bad_values(site_wire)))
            mutated = _replace(mutated, path, bad)
            needle = f"field {where or spec.request.__name__}:"
        elif kind == "extra-field":
            _get(mutated, path)["zz_extra"] = 1
            needle = "unexpected 'zz_extra'"
        else:
            name = data.draw(st.sampled_from(sorted(_get(mutated, path))))
            del _get(mutated, path)[name]
            needle = f"missing {name}"
        frame_body = pack([encode_struct(header, 0), mutated])
        err = assert_invalid(frame_body, header=header)
        assert needle in err.message
        if kind != "wrong-value":
            assert (where or spec.request.__name__) in err.message

    check()


def _full_value(wire: WireType) -> Any:
    """A value with every optional part present: each list has one item, no nullable is nil."""
    if isinstance(wire, IntWire):
        return 1
    if isinstance(wire, BoolType):
        return True
    if isinstance(wire, FloatType):
        return 1.5
    if isinstance(wire, StrType):
        return "s"
    if isinstance(wire, BytesType):
        return b"b"
    if isinstance(wire, NullableType):
        return _full_value(wire.inner)
    if isinstance(wire, ListType):
        return (_full_value(wire.inner),)
    if isinstance(wire, StructType):
        return wire.cls(**{f.name: _full_value(f.wire) for f in wire.fields})
    raise TypeError(wire)


def _every_mutation(cls: type, version: int) -> list[tuple[Any, str]]:
    """(mutated plain body, text the error must contain) for every site and every bad value."""
    wire = StructType(cls, version)
    plain = encode_struct(_full_value(wire), version)
    out = []
    for path, site_wire in _sites(wire, plain, ()):
        where = _path_str(path) or cls.__name__
        for bad in _bad_values(site_wire):
            out.append((_replace(copy.deepcopy(plain), path, bad), f"field {where}:"))
        value = _get(plain, path)
        if isinstance(value, dict):
            extra = copy.deepcopy(plain)
            _get(extra, path)["zz_extra"] = 1
            out.append((extra, f"{where} (v{version}): unexpected 'zz_extra'"))
            for name in value:
                missing = copy.deepcopy(plain)
                del _get(missing, path)[name]
                out.append((missing, f"{where} (v{version}): missing {name}"))
    return out


@pytest.mark.parametrize(("spec", "version"), MUTATION_CASES)
def test_every_site_of_every_request_rejects_every_wrong_value(spec: ApiSpec, version: int) -> None:
    header = RequestHeader(spec.key, version, 9, "c")
    plain_header = encode_struct(header, 0)
    mutations = _every_mutation(spec.request, version)
    assert mutations
    for mutated, needle in mutations:
        err = assert_invalid(pack([plain_header, mutated]), header=header)
        assert needle in err.message, (needle, err.message)


@pytest.mark.parametrize(("spec", "version"), MUTATION_CASES)
def test_every_site_of_every_response_rejects_every_wrong_value(
    spec: ApiSpec, version: int
) -> None:
    good = encode_struct(_full_value(StructType(spec.response, version)), version)
    assert decode_response(pack([{"correlation_id": 1}, good]), spec.key, version)
    for mutated, needle in _every_mutation(spec.response, version):
        with pytest.raises(InvalidRequestError) as info:
            decode_response(pack([{"correlation_id": 1}, mutated]), spec.key, version)
        assert info.value.code == INVALID_REQUEST
        assert needle in info.value.message, (needle, info.value.message)


def test_arrays_are_capped_at_the_schema_list_limit_before_allocation() -> None:
    # A frame big enough to hold MAX_ITEMS_DEFAULT + 1 items still cannot declare that many.
    items = MAX_ITEMS_DEFAULT + 1
    frame_body = b"\x92" + pack(header_map()) + b"\xdd" + items.to_bytes(4, "big") + b"\xc0" * items
    err = assert_invalid(frame_body, header=None)
    assert f"{items} exceeds max_array_len({MAX_ITEMS_DEFAULT})" in err.message


# ---------------------------------------------------------------------------------------------
# Fuzzing: whatever the bytes, only coded HighwaterErrors come out.


@THOROUGH
@given(st.binary(max_size=300))
def test_arbitrary_bytes_only_raise_coded_errors(frame_body: bytes) -> None:
    try:
        decode_request(frame_body)
    except RequestDecodeError as err:
        assert err.code in (INVALID_REQUEST, UNSUPPORTED_VERSION)
        assert err.header is None or type(err.header) is RequestHeader


@THOROUGH
@given(st.binary(max_size=300))
def test_arbitrary_bytes_to_decode_response_only_raise_coded_errors(frame_body: bytes) -> None:
    try:
        decode_response(frame_body, ApiKey.METADATA, 1)
    except (InvalidRequestError, UnsupportedVersionError) as err:
        assert err.code in (INVALID_REQUEST, UNSUPPORTED_VERSION)


@THOROUGH
@given(data=st.data())
def test_mutated_valid_frames_only_raise_coded_errors(data: st.DataObject) -> None:
    frame_body = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["set", "insert", "delete"]))
        at = data.draw(st.integers(0, len(frame_body)))
        if op == "set" and at < len(frame_body):
            frame_body[at] = data.draw(st.integers(0, 255))
        elif op == "insert":
            frame_body[at:at] = data.draw(st.binary(min_size=1, max_size=5))
        else:
            del frame_body[at : at + data.draw(st.integers(1, 5))]
    try:
        request = decode_request(bytes(frame_body))
    except RequestDecodeError as err:
        assert err.code in (INVALID_REQUEST, UNSUPPORTED_VERSION)
    else:
        assert type(request.header) is RequestHeader


# ---------------------------------------------------------------------------------------------
# decode_response is strict too (it raises the plain errors; there is no header to report).


def test_decode_response_rejects_malformed_bodies() -> None:
    key = ApiKey.API_VERSIONS
    good = encode_response(1, key, 0, ApiVersionsResponse(0, ()))[4:]
    assert decode_response(good, key, 0).body == ApiVersionsResponse(0, ())
    cases = [
        good + b"\xc0",
        good[:-1],
        pack([{"correlation_id": "1"}, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}]),
        pack([{}, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}]),
        pack([{"correlation_id": 1}, {"error_code": 0, "api_keys": []}]),
        pack([{"correlation_id": 1}]),
    ]
    for frame_body in cases:
        with pytest.raises(InvalidRequestError) as info:
            decode_response(frame_body, key, 0)
        assert info.value.code == INVALID_REQUEST
    with pytest.raises(UnsupportedVersionError) as unknown:
        decode_response(good, 99, 0)
    assert unknown.value.code == UNSUPPORTED_VERSION
