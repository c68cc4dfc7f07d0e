"""SyncBrokerConnection over a socketpair: a request and its answer, and how it breaks."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from client.errors import BrokerConnectionError
from client.security import PLAINTEXT_CLOSED_HINT
from client.sync_network import SyncBrokerConnection
from protocol.apis import ApiKey
from protocol.codec import decode_request, encode_response
from protocol.framing import FrameDecoder
from protocol.messages.common import BrokerEndpoint
from protocol.messages.metadata import MetadataRequest, MetadataResponse

ANSWER = MetadataResponse(
    brokers=(BrokerEndpoint(1, "h", 1),), cluster_id="c", controller_id=1, topics=()
)


@pytest.fixture
def pair() -> Iterator[tuple[SyncBrokerConnection, socket.socket]]:
    client, broker = socket.socketpair()
    with broker:
        yield SyncBrokerConnection(client, "h:1", "test", closed_hint=PLAINTEXT_CLOSED_HINT), broker
        client.close()


def _requests_read_by(broker: socket.socket) -> list[object]:
    decoder = FrameDecoder(1 << 20)
    broker.setblocking(False)
    decoder.receive_data(broker.recv(1 << 16))
    frames = []
    while isinstance(frame := decoder.next_frame(), bytes | bytearray):
        frames.append(decode_request(frame).body)
    return frames


def test_a_request_is_sent_and_its_answer_returned(
    pair: tuple[SyncBrokerConnection, socket.socket],
) -> None:
    connection, broker = pair
    # Both answers are on the wire before the requests (the socketpair buffers them): the
    # connection must match each to its own request, in order.
    broker.sendall(encode_response(0, ApiKey.METADATA, 1, ANSWER))
    broker.sendall(encode_response(1, ApiKey.METADATA, 1, ANSWER))
    assert connection.request(MetadataRequest(topics=("t",)), 1, timeout_ms=1_000) == ANSWER
    assert connection.request(MetadataRequest(topics=None), 1, timeout_ms=1_000) == ANSWER
    assert _requests_read_by(broker) == [MetadataRequest(("t",)), MetadataRequest(None)]
    assert not connection.broken


def test_no_answer_in_time_breaks_the_connection(
    pair: tuple[SyncBrokerConnection, socket.socket],
) -> None:
    connection, broker = pair
    with pytest.raises(BrokerConnectionError, match="h:1: request timed out"):
        connection.request(MetadataRequest(topics=None), 1, timeout_ms=50)
    assert connection.broken
    # The socket is closed: a late answer cannot be taken for the next request's.
    assert broker.recv(1 << 16)  # the request
    assert broker.recv(1 << 16) == b""
    with pytest.raises(BrokerConnectionError, match="timed out"):
        connection.request(MetadataRequest(topics=None), 1, timeout_ms=1_000)


def test_a_broker_that_closes_before_answering_gets_the_security_hint(
    pair: tuple[SyncBrokerConnection, socket.socket],
) -> None:
    connection, broker = pair
    broker.shutdown(socket.SHUT_WR)
    with pytest.raises(BrokerConnectionError) as caught:
        connection.request(MetadataRequest(topics=None), 1, timeout_ms=1_000)
    assert str(caught.value) == "h:1: connection closed by the broker" + PLAINTEXT_CLOSED_HINT


def test_an_answer_to_another_request_is_a_bad_response(
    pair: tuple[SyncBrokerConnection, socket.socket],
) -> None:
    connection, broker = pair
    broker.sendall(encode_response(7, ApiKey.METADATA, 1, ANSWER))
    with pytest.raises(BrokerConnectionError, match=r"h:1: bad response: .*correlation id 7"):
        connection.request(MetadataRequest(topics=None), 1, timeout_ms=1_000)
    assert connection.broken


def test_an_http_answer_is_named_as_such(pair: tuple[SyncBrokerConnection, socket.socket]) -> None:
    # What the metrics/status port answers a broker request with: its first four bytes would
    # otherwise be read as a frame length of 1213486160.
    connection, broker = pair
    broker.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
    with pytest.raises(BrokerConnectionError) as caught:
        connection.request(MetadataRequest(topics=None), 1, timeout_ms=1_000)
    assert str(caught.value) == (
        "h:1: bad response: the server answered in HTTP: is this the metrics/status port "
        "rather than a broker listener?"
    )


def test_a_bad_length_that_is_not_http_keeps_the_frame_error(
    pair: tuple[SyncBrokerConnection, socket.socket],
) -> None:
    connection, broker = pair
    broker.sendall(b"HTTX/1.1 400 Bad Request\r\n\r\n")
    with pytest.raises(BrokerConnectionError, match=r"bad response: frame length 1213486168 "):
        connection.request(MetadataRequest(topics=None), 1, timeout_ms=1_000)
