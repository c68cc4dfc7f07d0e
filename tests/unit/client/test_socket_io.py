"""LeanSocket over a real connected TCP pair on loopback."""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from client.socket_io import LeanSocket
from protocol.framing import NEED_DATA, FrameDecoder


@pytest.fixture
async def pair() -> AsyncIterator[tuple[LeanSocket, socket.socket]]:
    listener = socket.create_server(("127.0.0.1", 0))
    stream = await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1])
    peer, _ = listener.accept()
    listener.close()
    lean = LeanSocket(stream)
    try:
        yield lean, peer
    finally:
        lean.close()
        peer.close()


async def test_bytes_both_ways_and_the_peers_close(pair: tuple[LeanSocket, socket.socket]) -> None:
    lean, peer = pair
    await lean.send_all(b"ping")
    assert peer.recv(16) == b"ping"
    peer.sendall(b"pong")
    assert await lean.receive_some(16) == b"pong"
    waits = lean.waits
    peer.close()
    assert await lean.receive_some(16) == b""  # the peer closed
    assert lean.waits >= waits


async def test_a_receive_waits_for_data(pair: tuple[LeanSocket, socket.socket]) -> None:
    lean, peer = pair
    assert lean.try_receive(16) is None
    async with trio.open_nursery() as nursery:
        received: list[bytes] = []

        async def receive() -> None:
            received.append(await lean.receive_some(16))

        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        assert received == [] and lean.waits == 1
        peer.sendall(b"late")
    assert received == [b"late"]


async def test_a_send_the_peer_does_not_read_times_out(
    pair: tuple[LeanSocket, socket.socket],
) -> None:
    lean, _ = pair
    with pytest.raises(trio.TooSlowError):
        await lean.send_all(b"x" * (64 * 1024 * 1024), timeout_s=0.2)


async def test_close_wakes_a_waiting_receive(pair: tuple[LeanSocket, socket.socket]) -> None:
    lean, _ = pair
    raised: list[BaseException] = []

    async def receive() -> None:
        try:
            await lean.receive_some(16)
        except trio.ClosedResourceError as exc:
            raised.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        lean.close()
    assert len(raised) == 1 and lean.closed
    with pytest.raises(trio.ClosedResourceError):
        await lean.send_all(b"after")


async def test_pieces_reach_the_peer_whole_and_in_order_when_the_buffer_fills(
    pair: tuple[LeanSocket, socket.socket],
) -> None:
    """More than the socket buffers hold, in pieces of every size (empty ones too): the
    writes stop part-way through pieces and must resume at the right byte."""
    lean, peer = pair
    parts = [bytes([i % 251]) * size for i, size in enumerate([3, 0, 70_000, 1, 0, 2_000_000, 5])]
    parts += [b"%d" % i for i in range(600)]  # more pieces than one sendmsg takes
    expected = b"".join(parts)
    received = bytearray()

    def read_all() -> None:
        while len(received) < len(expected):
            chunk = peer.recv(65_536)
            assert chunk
            received.extend(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, read_all)
        await lean.send_parts(parts, timeout_s=30)
    assert received == expected
    assert lean.waits > 0  # it did have to wait for the buffer at least once


async def test_one_piece_is_a_plain_send(pair: tuple[LeanSocket, socket.socket]) -> None:
    lean, peer = pair
    await lean.send_parts([b"only"])
    assert peer.recv(16) == b"only"


async def test_ready_bytes_counts_what_waits_in_the_socket(
    pair: tuple[LeanSocket, socket.socket],
) -> None:
    lean, peer = pair
    assert lean.ready_bytes() == 0
    peer.sendall(b"x" * 1000)
    with trio.fail_after(5):
        while lean.ready_bytes() < 1000:
            await lean.wait_readable()
    assert lean.ready_bytes() == 1000
    assert await lean.receive_some(400) == b"x" * 400
    assert lean.ready_bytes() == 600


async def test_a_large_frame_is_read_in_place_only_once_half_of_it_is_there(
    pair: tuple[LeanSocket, socket.socket],
) -> None:
    """A length prefix and a byte make no buffer of the declared size; the whole frame, once
    it waits in the socket, is read straight into its own buffer (a bytearray)."""
    lean, peer = pair
    length = 96 * 1024  # over DIRECT_FRAME_BYTES, and it fits in a loopback receive buffer
    decoder = FrameDecoder()
    peer.sendall(struct.pack(">i", length) + b"a")
    with trio.fail_after(5):
        while decoder.buffered_bytes < 5:
            await lean.receive_frames(decoder, 64 * 1024, length)
    assert decoder.body_buffer(length, lean.ready_bytes) is None  # 1 byte of 96 KiB: none
    peer.sendall(b"b" * (length - 1))
    with trio.fail_after(5):
        while lean.ready_bytes() < length - 1:
            await lean.wait_readable()
        while (body := decoder.next_frame()) is NEED_DATA:
            await lean.receive_frames(decoder, 64 * 1024, length)
    assert isinstance(body, bytearray)  # filled in place
    assert body == b"a" + b"b" * (length - 1)
