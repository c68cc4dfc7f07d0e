"""Requests and responses as frames: header + body, strictly validated, bounded when unpacked.

A frame body is a msgpack array of two maps: `[header, body]`.

    request header:  {"api_key": int16, "api_version": int16, "correlation_id": int32,
                      "client_id": str | nil}
    response header: {"correlation_id": int32}

The body map is the API's request or response schema at the header's version (protocol.apis).

A Fetch response that carries large records is encoded in pieces (`encode_response_parts`):
the records go out as they came from the log, beside the packed rest, not copied into
msgpack's buffer and out again (docs/performance.md, "Sending large records").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgpack

from protocol.apis import ApiKey, api_spec
from protocol.errors import HighwaterError, InvalidRequestError
from protocol.framing import frame, length_prefix
from protocol.schema import MAX_ITEMS_DEFAULT, MAX_STRING_BYTES, Int16, Int32
from protocol.schema_compile import decode_struct, encode_struct

__all__ = [
    "MAX_MAP_ENTRIES",
    "MAX_STRING_BYTES",
    "Request",
    "RequestDecodeError",
    "RequestHeader",
    "Response",
    "ResponseHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "unpack_bounded",
]

# Every schema map is small; a larger map is hostile or broken.
MAX_MAP_ENTRIES: Final = 64


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: Int16
    api_version: Int16
    correlation_id: Int32
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: Int32


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: Any  # the request dataclass of header.api_key at header.api_version


@dataclass(frozen=True, slots=True)
class Response:
    header: ResponseHeader
    body: Any


class RequestDecodeError(InvalidRequestError):
    """A request that could not be decoded; `header` is set when the header itself was fine."""

    def __init__(self, cause: HighwaterError, header: RequestHeader | None) -> None:
        super().__init__(cause.message, cause.code)
        self.header = header


def _reject_ext(code: int, data: bytes) -> Any:
    raise InvalidRequestError(f"msgpack ext type {code} is not used by this protocol")


def _unique_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise InvalidRequestError("a map repeats a key")
    return result


def unpack_bounded(body: bytes | bytearray) -> Any:
    """msgpack-decode untrusted bytes with every length bounded before allocation."""
    try:
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=MAX_STRING_BYTES,
            max_bin_len=len(body),
            max_array_len=min(len(body), MAX_ITEMS_DEFAULT),
            max_map_len=MAX_MAP_ENTRIES,
            max_ext_len=0,
            ext_hook=_reject_ext,
            object_pairs_hook=_unique_keys,
        )
    except HighwaterError:
        raise
    except msgpack.exceptions.ExtraData as exc:
        raise InvalidRequestError("trailing bytes after the msgpack body") from exc
    except (ValueError, TypeError, msgpack.exceptions.StackError) as exc:
        # ValueError covers truncated data, limits exceeded and invalid UTF-8.
        raise InvalidRequestError(f"malformed msgpack body: {exc}") from exc


def _split(plain: Any) -> tuple[Any, Any]:
    if type(plain) is not list or len(plain) != 2:
        raise InvalidRequestError("frame body must be a msgpack array [header, body]")
    return plain[0], plain[1]


def encode_request(header: RequestHeader, body: object) -> bytes:
    """A complete frame (length prefix included) for this request."""
    spec = api_spec(header.api_key)
    spec.check_version(header.api_version)
    if type(body) is not spec.request:
        raise TypeError(f"{ApiKey(header.api_key).name} needs a {spec.request.__name__}")
    plain = [encode_struct(header, 0), encode_struct(body, header.api_version)]
    return frame(msgpack.packb(plain, use_bin_type=True))


def decode_request(frame_body: bytes | bytearray) -> Request:
    """Decode one frame body (without its length prefix) into a typed Request."""
    header: RequestHeader | None = None
    try:
        plain_header, plain_body = _split(unpack_bounded(frame_body))
        header = decode_struct(RequestHeader, 0, plain_header)
        spec = api_spec(header.api_key)
        spec.check_version(header.api_version)
        body: Any = decode_struct(spec.request, header.api_version, plain_body)
    except HighwaterError as exc:
        raise RequestDecodeError(exc, header) from exc
    return Request(header, body)


def encode_response(correlation_id: int, api_key: int, api_version: int, body: object) -> bytes:
    plain = _plain_response(correlation_id, api_key, api_version, body)
    return frame(msgpack.packb(plain, use_bin_type=True))


def _plain_response(correlation_id: int, api_key: int, api_version: int, body: object) -> Any:
    spec = api_spec(api_key)
    if type(body) is not spec.response:
        raise TypeError(f"{ApiKey(api_key).name} needs a {spec.response.__name__}")
    return [encode_struct(ResponseHeader(correlation_id), 0), encode_struct(body, api_version)]


def decode_response(frame_body: bytes | bytearray, api_key: int, api_version: int) -> Response:
    """Decode a response; the caller knows the api key and version from its correlation id."""
    plain_header, plain_body = _split(unpack_bounded(frame_body))
    header = decode_struct(ResponseHeader, 0, plain_header)
    spec = api_spec(api_key)
    return Response(header, decode_struct(spec.response, api_version, plain_body))


# Records at least this long are a piece of their own in a response's frame.
OUT_OF_LINE_BYTES: Final = 64 * 1024
_BIN32: Final = b"\xc6"  # msgpack's bin 32 marker; a 4-byte big-endian length follows


def encode_response_parts(
    correlation_id: int, api_key: int, api_version: int, body: object
) -> list[bytes]:
    """The frame `encode_response` makes, as pieces to write in order: in a Fetch response,
    each partition's records of OUT_OF_LINE_BYTES or more are a piece of their own (the very
    bytes object, not a copy), after its msgpack bin header."""
    if api_key != ApiKey.FETCH or not _has_large_records(body):
        return [encode_response(correlation_id, api_key, api_version, body)]
    plain = _plain_response(correlation_id, api_key, api_version, body)
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    parts: list[bytes] = []
    _pack_in_pieces(plain, packer, parts)
    parts.append(packer.bytes())
    parts[0] = length_prefix(sum(map(len, parts))) + parts[0]
    return parts


def _has_large_records(body: Any) -> bool:
    return any(len(p.records) >= OUT_OF_LINE_BYTES for t in body.responses for p in t.partitions)


def _pack_in_pieces(value: Any, packer: msgpack.Packer, parts: list[bytes]) -> None:
    """Pack `value` as msgpack.packb would, except that a long bytes object becomes its own
    piece: the bytes packed so far are taken out of `packer` first."""
    if type(value) is dict:
        packer.pack_map_header(len(value))
        for key, item in value.items():
            packer.pack(key)
            _pack_in_pieces(item, packer, parts)
    elif type(value) is list:
        packer.pack_array_header(len(value))
        for item in value:
            _pack_in_pieces(item, packer, parts)
    elif type(value) is bytes and len(value) >= OUT_OF_LINE_BYTES:
        parts.append(packer.bytes() + _BIN32 + len(value).to_bytes(4, "big"))
        packer.reset()
        parts.append(value)
    else:
        packer.pack(value)
