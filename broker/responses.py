"""A response as the broker sends it: its frame in pieces (large Fetch records not copied),
error messages cut short if the whole is too big, and Kafka's ApiVersions fallback."""

from __future__ import annotations

import dataclasses
from typing import Any

from protocol.apis import ApiKey, supported_versions
from protocol.codec import RequestHeader, encode_response, encode_response_parts
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.api_versions import ApiVersionsResponse

__all__ = ["api_versions_fallback", "encode"]

_MESSAGE_CHARS = 1000  # an error message cut to this when the whole response is too big


def encode(header: RequestHeader, response: object) -> list[bytes]:
    """Encode (in pieces); if that fails, again with every error_message cut short: a message
    quoting a client's oversized input (a 32 KiB topic name) must not cost the client its
    answer."""
    correlation_id, api_key, api_version = header.correlation_id, header.api_key, header.api_version
    try:
        return encode_response_parts(correlation_id, api_key, api_version, response)
    except HighwaterError:
        short = _short_messages(response)
        return encode_response_parts(correlation_id, api_key, api_version, short)


def _short_messages(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_short_messages(v) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if f.name == "error_message" and isinstance(item, str) and len(item) > _MESSAGE_CHARS:
            changes[f.name] = item[:_MESSAGE_CHARS] + "..."
        elif isinstance(item, tuple) or dataclasses.is_dataclass(item):
            changes[f.name] = _short_messages(item)
    return dataclasses.replace(value, **changes) if changes else value


def api_versions_fallback(header: RequestHeader) -> bytes:
    """Kafka's answer to ApiVersions at a version it does not speak: v0, UNSUPPORTED_VERSION,
    and the supported ranges."""
    body = ApiVersionsResponse(ErrorCode.UNSUPPORTED_VERSION, supported_versions())
    return encode_response(header.correlation_id, ApiKey.API_VERSIONS, 0, body)
