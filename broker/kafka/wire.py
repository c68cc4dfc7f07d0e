"""The two wires a listener may speak (`listener.wire.protocol.map`): Highwater's msgpack and
Kafka's own. Each turns a frame into a `Call` for the broker's handlers (a Highwater request
header and body) and a handler's response back into the frame to send; the server does not
know which it has. Pure: the Kafka wire's translation is broker.kafka.translate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from broker.kafka.translate import (
    Translated,
    advertised_versions,
    request_to_highwater,
    response_to_kafka,
)
from broker.responses import api_versions_fallback, encode
from protocol.apis import ApiKey, api_spec
from protocol.codec import RequestDecodeError, RequestHeader, decode_request
from protocol.errors import ErrorCode, HighwaterError
from protocol.kafka.frames import (
    KafkaDecodeError,
    KafkaHeader,
    decode_kafka_request,
    encode_kafka_response,
    response_class,
)
from protocol.kafka.mapping import convert
from protocol.kafka.versions import API_VERSIONS_KEY, KAFKA_ONLY_KEYS
from protocol.messages.api_versions import ApiVersionsResponse

__all__ = ["KAFKA_WIRE", "NATIVE_WIRE", "WIRES", "Call", "Wire"]


@dataclass(frozen=True, slots=True)
class Call:
    header: RequestHeader  # Highwater's: api_key, api_version, correlation_id, client_id
    body: Any
    kafka: Translated | None = None  # set on the Kafka wire


class Wire(Protocol):
    name: str

    def decode(self, frame_body: bytes | bytearray) -> Call:
        """Raises RequestDecodeError."""

    def encode(self, call: Call, response: Any) -> list[bytes]: ...

    def refusal(self, error: RequestDecodeError) -> bytes | None:
        """The answer to a request that could not be decoded, if it gets one (Kafka answers
        ApiVersions at an unsupported version); None: close the connection."""


class NativeWire:
    name = "highwater"

    def decode(self, frame_body: bytes | bytearray) -> Call:
        request = decode_request(frame_body)
        return Call(request.header, request.body)

    def encode(self, call: Call, response: Any) -> list[bytes]:
        return encode(call.header, response)

    def refusal(self, error: RequestDecodeError) -> bytes | None:
        if error.header is not None and _unsupported_api_versions(error):
            return api_versions_fallback(error.header)
        return None


class _KafkaDecodeError(RequestDecodeError):
    def __init__(self, error: KafkaDecodeError) -> None:
        header = None
        if error.header is not None:
            k = error.header
            header = RequestHeader(k.api_key, k.api_version, k.correlation_id, k.client_id)
        super().__init__(HighwaterError(str(error), ErrorCode(error.code)), header)


class KafkaWire:
    name = "kafka"

    def decode(self, frame_body: bytes | bytearray) -> Call:
        try:
            kafka = decode_kafka_request(frame_body)
            translated = request_to_highwater(kafka)
        except KafkaDecodeError as exc:
            raise _KafkaDecodeError(exc) from exc
        except (HighwaterError, ValueError, TypeError) as exc:
            raise _KafkaDecodeError(
                KafkaDecodeError(f"cannot translate: {exc}", ErrorCode.INVALID_REQUEST)
            ) from exc
        h = kafka.header
        key = translated.api_key
        # The handler's version: Highwater's newest for a shared API, Kafka's own otherwise.
        version = h.api_version if key in KAFKA_ONLY_KEYS else api_spec(key).max_version
        header = RequestHeader(key, version, h.correlation_id, h.client_id)
        return Call(header, translated.body, translated)

    def encode(self, call: Call, response: Any) -> list[bytes]:
        assert call.kafka is not None
        body = response_to_kafka(call.kafka, response)
        return [encode_kafka_response(call.kafka.kafka.header, body)]

    def refusal(self, error: RequestDecodeError) -> bytes | None:
        if error.header is None or not _unsupported_api_versions(error):
            return None
        # KIP-511: v0, UNSUPPORTED_VERSION and the ranges, so the client can pick a version.
        kafka_header = KafkaHeader(API_VERSIONS_KEY, 0, error.header.correlation_id, None)
        ranges = advertised_versions().api_keys
        refused = ApiVersionsResponse(ErrorCode.UNSUPPORTED_VERSION, ranges)
        v0 = response_class(API_VERSIONS_KEY, 0)
        return encode_kafka_response(kafka_header, convert(refused, v0))


def _unsupported_api_versions(error: RequestDecodeError) -> bool:
    """ApiVersions at a version the wire does not speak: answered, not closed (KIP-511)."""
    header = error.header
    return (
        header is not None
        and header.api_key == ApiKey.API_VERSIONS
        and error.code == ErrorCode.UNSUPPORTED_VERSION
    )


NATIVE_WIRE = NativeWire()
KAFKA_WIRE = KafkaWire()
WIRES: dict[str, Wire] = {NATIVE_WIRE.name: NATIVE_WIRE, KAFKA_WIRE.name: KAFKA_WIRE}
