"""A connected TCP socket driven by trio's readiness waits, for the request path.

trio's SocketStream pays, per call, a cancellation check, a yield to the scheduler after every
successful send or receive, and several context managers (docs/performance.md, "The request
loop"). `LeanSocket` calls the non-blocking socket directly and waits
(`trio.lowlevel.wait_readable`/`wait_writable`) only when it would block. It does not yield
otherwise: a caller looping over ready data must yield itself (`trio.lowlevel.checkpoint`) so
other tasks run; `waits` counts the waits, so it can tell.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import socket
import sys
import termios
from collections.abc import Callable, Sequence
from typing import Final, Protocol

import trio

__all__ = ["FrameSink", "LeanSocket"]

_IOV_MAX: Final = 512  # pieces per sendmsg (Linux allows 1024)
_INT_BYTES: Final = b"\0\0\0\0"


class FrameSink(Protocol):
    """What `LeanSocket.receive_frames` feeds: a FrameDecoder, or a ClientProtocol over one."""

    def body_buffer(
        self, limit_bytes: int | None = None, ready_bytes: Callable[[], int] | None = None
    ) -> memoryview | None: ...

    def body_received(self, count: int) -> None: ...

    def receive_data(self, data: bytes | bytearray) -> None: ...


class LeanSocket:
    """Owns a connected, non-blocking socket taken from a trio SocketStream."""

    def __init__(self, stream: trio.SocketStream) -> None:
        # detach: the trio socket object gives up the descriptor, so nothing else closes it.
        self._sock = socket.socket(fileno=stream.socket.detach())
        self._sock.setblocking(False)
        self._closed = False
        self.waits = 0  # readiness waits so far: each one let other tasks run

    @property
    def closed(self) -> bool:
        return self._closed

    def getpeername(self) -> tuple[str, int]:
        host, port = self._sock.getpeername()[:2]
        return host, port

    def try_receive(self, max_bytes: int) -> bytes | None:
        """Bytes read now (b"": the peer closed), or None if there are none yet. Raises
        OSError, or trio.ClosedResourceError once closed."""
        if self._closed:
            raise trio.ClosedResourceError("socket closed")
        try:
            return self._sock.recv(max_bytes)
        except BlockingIOError:
            return None

    async def wait_readable(self) -> None:
        """Until bytes (or the peer's close) may be read; trio.ClosedResourceError if closed."""
        if self._closed:
            raise trio.ClosedResourceError("socket closed")
        self.waits += 1
        await trio.lowlevel.wait_readable(self._sock)

    def ready_bytes(self) -> int:
        """Bytes waiting in the socket's receive queue now (FIONREAD); 0 if it cannot tell."""
        if self._closed:
            return 0
        try:
            answer = fcntl.ioctl(self._sock.fileno(), termios.FIONREAD, _INT_BYTES)
        except OSError:
            return 0
        return int.from_bytes(answer, sys.byteorder)

    async def receive_some(self, max_bytes: int) -> bytes:
        """Bytes read (b"": the peer closed), waiting only if none are there yet; no yield
        when some are."""
        while True:
            data = self.try_receive(max_bytes)
            if data is not None:
                return data
            await self.wait_readable()

    async def receive_into(self, buffer: memoryview) -> int:
        """Bytes read into `buffer` (0: the peer closed), waiting only if none are there yet;
        no yield when some are."""
        while True:
            if self._closed:
                raise trio.ClosedResourceError("socket closed")
            try:
                return self._sock.recv_into(buffer)
            except BlockingIOError:
                await self.wait_readable()

    async def receive_frames(
        self, sink: FrameSink, max_bytes: int, direct_limit_bytes: int | None = None
    ) -> int:
        """Read once into `sink`: the rest of a large frame straight into its own buffer
        (FrameDecoder.body_buffer, up to `direct_limit_bytes`, once half of it is here or
        waiting; docs/performance.md, "Reading large frames"), else up to `max_bytes`. The
        bytes read; 0: the peer closed."""
        target = sink.body_buffer(direct_limit_bytes, self.ready_bytes)
        if target is None:
            data = await self.receive_some(max_bytes)
            if data:
                sink.receive_data(data)
            return len(data)
        with target:
            count = await self.receive_into(target)
        if count:
            sink.body_received(count)
        return count

    async def send_all(self, data: bytes, timeout_s: float = math.inf) -> None:
        """Write all of `data`; waits (at most `timeout_s`, then trio.TooSlowError) only while
        the socket's buffer is full; no yield when it is not."""
        if self._closed:
            raise trio.ClosedResourceError("socket closed")
        sock = self._sock
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            return
        with trio.fail_after(timeout_s), memoryview(data) as view:
            while sent < len(view):
                self.waits += 1
                await trio.lowlevel.wait_writable(sock)
                if self._closed:
                    raise trio.ClosedResourceError("socket closed")
                with contextlib.suppress(BlockingIOError):
                    sent += sock.send(view[sent:])

    async def send_parts(self, parts: Sequence[bytes], timeout_s: float = math.inf) -> None:
        """Write `parts` one after the other, as `send_all` writes one (scatter/gather: no
        piece is copied into a joined buffer first)."""
        if len(parts) == 1:
            await self.send_all(parts[0], timeout_s)
            return
        if self._closed:
            raise trio.ClosedResourceError("socket closed")
        sock = self._sock
        views = [memoryview(part) for part in parts]
        try:
            sent = sock.sendmsg(views[:_IOV_MAX])
        except BlockingIOError:
            sent = 0
        with trio.fail_after(timeout_s):
            while True:
                while views and sent >= len(views[0]):
                    sent -= len(views.pop(0))
                if not views:
                    return
                views[0] = views[0][sent:]
                self.waits += 1
                await trio.lowlevel.wait_writable(sock)
                if self._closed:
                    raise trio.ClosedResourceError("socket closed")
                try:
                    sent = sock.sendmsg(views[:_IOV_MAX])
                except BlockingIOError:
                    sent = 0

    def close(self) -> None:
        """Close now; a task waiting on the socket gets trio.ClosedResourceError."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):  # outside a trio run: nothing waits on it
            trio.lowlevel.notify_closing(self._sock)
        self._sock.close()
