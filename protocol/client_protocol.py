"""The client side of one connection, sans-IO: requests out, responses matched back in.

Kafka answers the requests of one connection in order, so responses are matched to requests by
correlation id in FIFO order; a response that does not match the oldest outstanding request
means the stream is broken. The caller owns the socket: `send_request` returns the bytes to
write, `receive_data` takes what was read, `next_response` returns a decoded response or
NEED_DATA.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.apis import api_key_of, api_spec
from protocol.codec import RequestHeader, decode_response, encode_request
from protocol.errors import FrameError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES, NEED_DATA, FrameDecoder, NeedData

__all__ = ["HTTP_ANSWER_HINT", "ClientProtocol", "InFlight", "ReceivedResponse"]

_MAX_CORRELATION_ID = (1 << 31) - 1
# An HTTP server dialled by mistake (the metrics and status port) answers "HTTP/1.1 400 ...",
# whose first four bytes read as a length prefix of 1213486160.
_HTTP_PREFIX = b"HTTP"
HTTP_ANSWER_HINT = (
    "the server answered in HTTP: is this the metrics/status port rather than a broker listener?"
)


@dataclass(frozen=True, slots=True)
class InFlight:
    correlation_id: int
    api_key: int
    api_version: int


@dataclass(frozen=True, slots=True)
class ReceivedResponse:
    correlation_id: int
    api_key: int
    body: Any  # the response dataclass of api_key at the request's version


class ClientProtocol:
    def __init__(
        self, client_id: str | None = None, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        self.client_id = client_id
        self._next_correlation_id = 0
        self._in_flight: deque[InFlight] = deque()
        self._decoder = FrameDecoder(max_frame_bytes)
        self._first_bytes = b""  # the stream's first length prefix, for FrameError's message

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def send_request(
        self, body: object, api_version: int | None = None, *, expect_response: bool = True
    ) -> tuple[int, bytes]:
        """(correlation id, frame bytes) for `body`; the newest version unless one is given.

        `expect_response=False` is for Produce with acks=0, which the broker never answers.
        """
        api_key = api_key_of(type(body))
        version = api_spec(api_key).max_version if api_version is None else api_version
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _MAX_CORRELATION_ID
        data = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), body)
        if expect_response:
            self._in_flight.append(InFlight(correlation_id, api_key, version))
        return correlation_id, data

    def receive_data(self, data: bytes | bytearray) -> None:
        if len(self._first_bytes) < len(_HTTP_PREFIX):
            self._first_bytes += bytes(data[: len(_HTTP_PREFIX) - len(self._first_bytes)])
        self._decoder.receive_data(data)

    def body_buffer(
        self, limit_bytes: int | None = None, ready_bytes: Callable[[], int] | None = None
    ) -> memoryview | None:
        """Where the rest of a large response may be read in place (FrameDecoder.body_buffer);
        report what was read with `body_received`."""
        return self._decoder.body_buffer(limit_bytes, ready_bytes)

    def body_received(self, count: int) -> None:
        self._decoder.body_received(count)

    def next_response(self) -> ReceivedResponse | NeedData:
        try:
            frame_body = self._decoder.next_frame()
        except FrameError as exc:
            if self._first_bytes == _HTTP_PREFIX:
                raise FrameError(HTTP_ANSWER_HINT) from exc
            raise
        if frame_body is NEED_DATA:
            return NEED_DATA
        assert isinstance(frame_body, bytes | bytearray)
        if not self._in_flight:
            raise FrameError("response received with no request outstanding")
        expected = self._in_flight.popleft()
        response = decode_response(frame_body, expected.api_key, expected.api_version)
        if response.header.correlation_id != expected.correlation_id:
            raise FrameError(
                f"response correlation id {response.header.correlation_id}, "
                f"expected {expected.correlation_id}"
            )
        return ReceivedResponse(expected.correlation_id, expected.api_key, response.body)
