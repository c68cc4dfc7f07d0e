"""FrameDecoder: split a byte stream into frames however it is chunked; refuse bad lengths."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import ErrorCode, FrameError, HighwaterError
from protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    DIRECT_FRAME_BYTES,
    LENGTH_PREFIX_BYTES,
    NEED_DATA,
    FrameDecoder,
    frame,
)
from tests.unit.protocol.strategies import THOROUGH

BODIES = st.lists(st.binary(max_size=40), max_size=6)


def _drain(decoder: FrameDecoder) -> list[bytes]:
    out: list[bytes] = []
    while True:
        item = decoder.next_frame()
        if item is NEED_DATA:
            return out
        assert isinstance(item, bytes)
        out.append(item)


def _length(n: int) -> bytes:
    return struct.pack(">i", n)


def test_frame_prefixes_the_big_endian_length() -> None:
    assert LENGTH_PREFIX_BYTES == 4
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"x" * 0x0102) == b"\x00\x00\x01\x02" + b"x" * 0x0102


def test_default_max_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    assert FrameDecoder().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


@pytest.mark.parametrize("bad", [0, -1])
def test_max_frame_bytes_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        FrameDecoder(max_frame_bytes=bad)


def test_byte_by_byte_each_frame_appears_exactly_when_its_last_byte_arrives() -> None:
    bodies = [b"hello", b"", b"\x00\x01\x02", b"x" * 300, b""]
    stream = b"".join(frame(b) for b in bodies)
    ends = set()
    pos = 0
    for b in bodies:
        pos += LENGTH_PREFIX_BYTES + len(b)
        ends.add(pos)
    decoder = FrameDecoder()
    got: list[bytes] = []
    for i in range(len(stream)):
        decoder.receive_data(stream[i : i + 1])
        new = _drain(decoder)
        if i + 1 in ends:
            assert len(new) == 1
        else:
            assert new == []
        got.extend(new)
    assert got == bodies
    assert decoder.buffered_bytes == 0
    assert decoder.next_frame() is NEED_DATA


@THOROUGH
@given(bodies=BODIES, data=st.data())
def test_random_chunking_yields_the_same_frames(bodies: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(frame(b) for b in bodies)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    decoder = FrameDecoder(max_frame_bytes=64)
    got: list[bytes] = []
    received = 0
    consumed = 0
    for chunk in chunks:
        decoder.receive_data(chunk)
        received += len(chunk)
        new = _drain(decoder)
        got.extend(new)
        consumed += sum(LENGTH_PREFIX_BYTES + len(b) for b in new)
        assert decoder.buffered_bytes == received - consumed
    assert got == bodies
    assert decoder.buffered_bytes == 0


@THOROUGH
@given(bodies=BODIES, data=st.data())
def test_frames_fed_interleaved_with_reads_survive_buffer_compaction(
    bodies: list[bytes], data: st.DataObject
) -> None:
    # Read one frame at a time (not draining) so the read position is often mid-buffer when
    # more data arrives: exercises the lazy compaction in receive_data.
    stream = b"".join(frame(b) for b in bodies) + frame(b"tail")
    decoder = FrameDecoder()
    got: list[bytes] = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, 30))
        decoder.receive_data(memoryview(stream)[pos : pos + step])
        pos += step
        item = decoder.next_frame()
        if item is not NEED_DATA:
            assert isinstance(item, bytes)
            got.append(item)
    got.extend(_drain(decoder))
    assert got == [*bodies, b"tail"]


@pytest.mark.parametrize(
    "partial",
    [b"", b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x05", b"\x00\x00\x00\x05abcd"],
    ids=["empty", "1-byte-prefix", "3-byte-prefix", "prefix-only", "body-short-by-1"],
)
def test_incomplete_input_needs_data_and_keeps_the_bytes(partial: bytes) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(partial)
    assert decoder.next_frame() is NEED_DATA
    assert decoder.next_frame() is NEED_DATA  # asking again changes nothing
    assert decoder.buffered_bytes == len(partial)
    decoder.receive_data((b"\x00\x00\x00\x05abcde")[len(partial) :])
    assert decoder.next_frame() == b"abcde"


def test_receive_data_accepts_bytearray_and_memoryview_and_returns_bytes() -> None:
    decoder = FrameDecoder()
    chunk = bytearray(frame(b"abc"))
    decoder.receive_data(chunk)
    decoder.receive_data(memoryview(frame(b"de")))
    first = decoder.next_frame()
    chunk[5] = ord("Z")  # the caller reusing its buffer must not change what was received
    assert first == b"abc"
    assert type(first) is bytes
    assert decoder.next_frame() == b"de"


@pytest.mark.parametrize(
    ("max_frame_bytes", "declared"),
    [
        (DEFAULT_MAX_FRAME_BYTES, -1),
        (DEFAULT_MAX_FRAME_BYTES, -(2**31)),
        (DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_FRAME_BYTES + 1),
        (DEFAULT_MAX_FRAME_BYTES, 2**31 - 1),
        (16, 17),
        (1, -5),
    ],
)
def test_bad_length_raises_from_the_prefix_alone(max_frame_bytes: int, declared: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=max_frame_bytes)
    decoder.receive_data(_length(declared))  # no body bytes at all: nothing to wait for
    tracemalloc.start()
    try:
        with pytest.raises(FrameError) as info:
            decoder.next_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # nothing of the declared size was allocated
    err = info.value
    assert isinstance(err, HighwaterError)
    assert err.code == 42
    assert err.code is ErrorCode.INVALID_REQUEST
    assert str(declared) in err.message
    assert decoder.buffered_bytes == LENGTH_PREFIX_BYTES


def test_decoder_stays_broken_after_a_bad_length() -> None:
    decoder = FrameDecoder(max_frame_bytes=8)
    decoder.receive_data(frame(b"ok") + _length(9) + b"123456789" + frame(b"later"))
    assert decoder.next_frame() == b"ok"  # frames before the bad one are still delivered
    with pytest.raises(FrameError) as first:
        decoder.next_frame()
    with pytest.raises(FrameError) as again:
        decoder.next_frame()
    assert again.value is first.value
    with pytest.raises(FrameError) as on_receive:
        decoder.receive_data(frame(b"fine"))
    assert on_receive.value is first.value
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_frame_exactly_at_the_max_is_accepted_and_one_more_byte_is_not() -> None:
    ok = FrameDecoder(max_frame_bytes=10)
    ok.receive_data(frame(b"0123456789"))
    assert ok.next_frame() == b"0123456789"

    too_big = FrameDecoder(max_frame_bytes=10)
    too_big.receive_data(frame(b"0123456789A"))
    with pytest.raises(FrameError) as info:
        too_big.next_frame()
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_default_max_boundary_is_checked_without_sending_the_body() -> None:
    at_max = FrameDecoder()
    at_max.receive_data(_length(DEFAULT_MAX_FRAME_BYTES))
    assert at_max.next_frame() is NEED_DATA  # legal: waits for the body

    over = FrameDecoder()
    over.receive_data(_length(DEFAULT_MAX_FRAME_BYTES + 1))
    with pytest.raises(FrameError):
        over.next_frame()


def test_empty_frames_are_frames() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(frame(b"") * 3)
    assert _drain(decoder) == [b"", b"", b""]
    assert decoder.buffered_bytes == 0


# --- reading a large frame in place (body_buffer / body_received) ------------------------------

# Sizes around the in-place threshold; bodies are a repeated byte so hypothesis stays fast.
_SIZES = st.sampled_from(
    [
        0,
        1,
        7,
        DIRECT_FRAME_BYTES - 1,
        DIRECT_FRAME_BYTES,
        DIRECT_FRAME_BYTES + 5,
        3 * DIRECT_FRAME_BYTES,
    ]
)


@THOROUGH
@given(sizes=st.lists(_SIZES, max_size=5), data=st.data())
def test_reading_in_place_or_not_yields_the_same_frames(
    sizes: list[int], data: st.DataObject
) -> None:
    # A reader as the client's: where the decoder offers a frame's buffer it writes a random
    # part of the stream into it (recv_into), else it hands over a random chunk.
    bodies = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(frame(b) for b in bodies)
    decoder = FrameDecoder()
    got: list[bytes] = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, 2 * DIRECT_FRAME_BYTES))
        target = decoder.body_buffer()
        if target is not None and data.draw(st.booleans()):
            count = min(step, len(target), len(stream) - pos)
            target[:count] = stream[pos : pos + count]
            target.release()
            decoder.body_received(count)
        else:
            count = min(step, len(stream) - pos)
            decoder.receive_data(stream[pos : pos + count])
        pos += count
        got.extend(bytes(body) for body in _drain_any(decoder))
        assert decoder.buffered_bytes == pos - sum(LENGTH_PREFIX_BYTES + len(b) for b in got)
    assert got == bodies
    assert decoder.body_buffer() is None


def _drain_any(decoder: FrameDecoder) -> list[bytes | bytearray]:
    out: list[bytes | bytearray] = []
    while (item := decoder.next_frame()) is not NEED_DATA:
        assert isinstance(item, bytes | bytearray)
        out.append(item)
    return out


def test_body_buffer_is_offered_only_for_a_large_frame_not_yet_whole() -> None:
    decoder = FrameDecoder()
    assert decoder.body_buffer() is None  # nothing buffered
    decoder.receive_data(_length(DIRECT_FRAME_BYTES)[:3])
    assert decoder.body_buffer() is None  # the length is not known yet
    decoder.receive_data(_length(DIRECT_FRAME_BYTES)[3:] + b"ab")
    target = decoder.body_buffer()
    assert target is not None
    assert len(target) == DIRECT_FRAME_BYTES - 2  # the two bytes already there were moved in
    target[:] = b"c" * len(target)
    target.release()
    decoder.body_received(DIRECT_FRAME_BYTES - 2)
    assert decoder.body_buffer() is None  # whole
    assert decoder.next_frame() == b"ab" + b"c" * (DIRECT_FRAME_BYTES - 2)

    small = FrameDecoder()
    small.receive_data(_length(DIRECT_FRAME_BYTES - 1))
    assert small.body_buffer() is None  # small frames take the usual path

    limited = FrameDecoder()
    limited.receive_data(_length(DIRECT_FRAME_BYTES + 1))
    assert limited.body_buffer(limit_bytes=DIRECT_FRAME_BYTES) is None  # over the caller's limit
    assert limited.body_buffer(limit_bytes=DIRECT_FRAME_BYTES + 1) is not None


def test_body_buffer_checks_the_length_before_making_the_buffer() -> None:
    decoder = FrameDecoder(max_frame_bytes=DIRECT_FRAME_BYTES)
    decoder.receive_data(_length(DIRECT_FRAME_BYTES + 1))
    tracemalloc.start()
    try:
        with pytest.raises(FrameError):
            decoder.body_buffer()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < DIRECT_FRAME_BYTES
    with pytest.raises(FrameError):  # broken for good
        decoder.next_frame()


@pytest.mark.parametrize("count", [-1, DIRECT_FRAME_BYTES + 1])
def test_body_received_must_match_the_buffer_given(count: int) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(_length(DIRECT_FRAME_BYTES))
    assert decoder.body_buffer() is not None
    with pytest.raises(ValueError, match="does not match"):
        decoder.body_received(count)
    fresh = FrameDecoder()
    with pytest.raises(ValueError, match="does not match"):
        fresh.body_received(1)  # no buffer was given


def test_a_declared_length_sets_nothing_aside_until_half_the_frame_is_here_or_waiting() -> None:
    """With `ready_bytes` (the socket's FIONREAD), 4 bytes of length and a byte of body make
    no 1 MiB buffer; the frame is kept as it arrives until half of it has come or waits to be
    read, then read in place."""
    length = 1 << 20
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        decoder.receive_data(_length(length) + b"x")
        assert decoder.body_buffer(length, lambda: 0) is None
        assert decoder.body_buffer(length, lambda: length // 2 - 2) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < DIRECT_FRAME_BYTES
    assert decoder.buffered_bytes == LENGTH_PREFIX_BYTES + 1
    whole = FrameDecoder()
    whole.receive_data(_length(length) + b"x")
    target = whole.body_buffer(length, lambda: length - 1)  # the rest waits: read in place
    assert target is not None and len(target) == length - 1
    target.release()
    decoder.receive_data(b"y" * (length // 2 - 1))  # half is here now
    rest = decoder.body_buffer(length, lambda: 0)
    assert rest is not None and len(rest) == length // 2
    rest[:] = b"z" * len(rest)
    rest.release()
    decoder.body_received(length // 2)
    assert decoder.next_frame() == b"x" + b"y" * (length // 2 - 1) + b"z" * (length // 2)
