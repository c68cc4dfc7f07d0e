"""Kafka request and response frames: the request header (v1, or v2 with tagged fields for a
flexible version), the body as kio's dataclass for that API and version, and the response
header (v0, or v1 for a flexible response other than ApiVersions: KIP-511).

Only the (api key, version) pairs in `versions.DECODED` are decoded; anything else is a
`KafkaDecodeError`, with the header when it could be read so that ApiVersions can answer
UNSUPPORTED_VERSION as Kafka does. Every length the message declares is checked against the
bytes left before kio reads it (protocol.kafka.bounds: kio's reader would allocate from it).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from protocol.errors import ErrorCode
from protocol.framing import length_prefix
from protocol.kafka.bounds import BoundsError, check_bounds
from protocol.kafka.versions import API_VERSIONS_KEY, DECODED

__all__ = [
    "KafkaDecodeError",
    "KafkaHeader",
    "KafkaRequest",
    "decode_kafka_request",
    "encode_kafka_response",
    "is_flexible",
    "request_class",
    "response_class",
]

_API_AND_VERSION: Final = struct.Struct(">hh")
_CORRELATION_ID: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class KafkaHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    header: KafkaHeader
    body: Any  # kio's request class for (api_key, api_version)


class KafkaDecodeError(ValueError):
    """A request this listener cannot read. `header` is set when the header itself was read
    (the body, or the version, was the problem); `code` is Kafka's error code for it."""

    def __init__(self, message: str, code: int, header: KafkaHeader | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.header = header


@cache
def request_class(api_key: int, api_version: int) -> Any:
    return load_request_schema(api_key, api_version)


@cache
def response_class(api_key: int, api_version: int) -> Any:
    return load_response_schema(api_key, api_version)


@cache
def is_flexible(api_key: int, api_version: int) -> bool:
    return bool(request_class(api_key, api_version).__flexible__)


@cache
def _body_reader(api_key: int, api_version: int) -> Any:
    return entity_reader(request_class(api_key, api_version))


@cache
def _body_writer(api_key: int, api_version: int) -> Any:
    return entity_writer(response_class(api_key, api_version))


# What kio's readers raise on bytes that are not a valid message (KeyError: a tagged field
# it does not know; Kafka would skip it, kio refuses it).
_READ_ERRORS: Final = (
    BoundsError,
    DecodeError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    OverflowError,
    struct.error,
)
_HEADER_V1_READER: Final = entity_reader(RequestHeaderV1)
_HEADER_V2_READER: Final = entity_reader(RequestHeaderV2)


def decode_kafka_request(frame_body: bytes | bytearray) -> KafkaRequest:
    """One frame body (no length prefix) as a typed request."""
    if len(frame_body) < _API_AND_VERSION.size + _CORRELATION_ID.size:
        raise KafkaDecodeError("request shorter than its header", ErrorCode.INVALID_REQUEST)
    if not isinstance(frame_body, bytes):
        # A large request is read into a buffer of its own (broker.server); kio's reader
        # takes only read-only buffers, which a view gives without a copy.
        frame_body = memoryview(frame_body).toreadonly()  # type: ignore[assignment]
    api_key, api_version = _API_AND_VERSION.unpack_from(frame_body)
    versions = DECODED.get(api_key)
    supported = versions is not None and versions[0] <= api_version <= versions[1]
    # An unsupported version's header layout is unknown; Kafka reads it as v1 to answer
    # ApiVersions (whose v3+ header v2 only adds tagged fields after client_id).
    flexible = supported and is_flexible(api_key, api_version)
    view = memoryview(frame_body)
    try:
        check_bounds(RequestHeaderV2 if flexible else RequestHeaderV1, view, 0)
        raw, offset = (_HEADER_V2_READER if flexible else _HEADER_V1_READER)(frame_body, 0)
    except _READ_ERRORS as exc:
        raise KafkaDecodeError(f"bad request header: {exc}", ErrorCode.INVALID_REQUEST) from exc
    header = KafkaHeader(api_key, api_version, raw.correlation_id, raw.client_id)
    if versions is None:
        raise KafkaDecodeError(
            f"api key {api_key} is not served", ErrorCode.UNSUPPORTED_VERSION, header
        )
    if not supported:
        raise KafkaDecodeError(
            f"api key {api_key} version {api_version} is not supported (versions "
            f"{versions[0]}-{versions[1]})",
            ErrorCode.UNSUPPORTED_VERSION,
            header,
        )
    try:
        check_bounds(request_class(api_key, api_version), view, offset)
        body, _ = _body_reader(api_key, api_version)(frame_body, offset)
    except _READ_ERRORS as exc:
        raise KafkaDecodeError(
            f"malformed api key {api_key} v{api_version} body: {exc}",
            ErrorCode.INVALID_REQUEST,
            header,
        ) from exc
    # Bytes after the body are ignored, as Kafka's RequestContext.parseRequest does: librdkafka
    # 2.1x sends three after a Metadata v12 request for every topic.
    return KafkaRequest(header, body)


def encode_kafka_response(header: KafkaHeader, body: Any) -> bytes:
    """The whole response frame (length prefix included)."""
    out = io.BytesIO()
    out.write(_CORRELATION_ID.pack(header.correlation_id))
    if header.api_key != API_VERSIONS_KEY and is_flexible(header.api_key, header.api_version):
        out.write(b"\x00")  # response header v1: no tagged fields
    _body_writer(header.api_key, header.api_version)(out, body)
    payload = out.getvalue()
    return length_prefix(len(payload)) + payload
