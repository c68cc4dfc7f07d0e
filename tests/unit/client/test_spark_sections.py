"""The compiled decoder of a usual records section (client/spark/_sections.c) against its
Python twin: the same columns for every section it takes, None for every other, no crash on
damaged bytes."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")
sections = pytest.importorskip("client.spark._sections", reason="the C decoder was not built")

from client.spark.columns import _pack  # noqa: E402

_ints = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-40, 300),  # the fixint, int8 and uint8 edges
    st.sampled_from([2**63, 2**64 - 1, 127, 128, -32, -33, 255, 256, 65535, 65536]),
)
_maybe_bytes = st.one_of(st.none(), st.binary(max_size=300), st.text(max_size=3))


@st.composite
def _entries(draw: Any) -> list[list[Any]]:
    """Entries mostly of the usual shape, some with one field of another shape."""
    count = draw(st.integers(0, 20))
    entries: list[list[Any]] = [
        [draw(_ints), i, draw(_maybe_bytes), draw(_maybe_bytes), []] for i in range(count)
    ]
    if count and draw(st.booleans()):
        i = draw(st.integers(0, count - 1))
        field = draw(st.integers(0, 4))
        entries[i][field] = draw(
            st.one_of(_ints, _maybe_bytes, st.just([["h", b"v"]]), st.just(1.5), st.just([]))
        )
    if count and draw(st.booleans()):
        i = draw(st.integers(0, count - 1))
        entries[i] = entries[i][: draw(st.integers(0, 6))]  # too few fields, or as many
    return entries


def _python(section: bytes, count: int, lo: int, hi: int) -> tuple[bytes, ...] | None:
    """What the Python path makes of the section when it has the usual shape, else None."""
    try:
        entries = msgpack.unpackb(section, raw=False, use_list=False)
    except (ValueError, TypeError, msgpack.exceptions.StackError):
        return None
    if type(entries) is not tuple or len(entries) != count:
        return None
    for i, e in enumerate(entries):
        if not (
            type(e) is tuple
            and len(e) == 5
            and type(e[0]) is int
            and -(2**63) <= e[0] < 2**63
            and type(e[1]) is int
            and e[1] == i
            and all(v is None or type(v) is bytes for v in e[2:4])
            and e[4] == ()
        ):
            return None
    picked = entries[lo:hi]
    return _pack(
        tuple(e[0] for e in picked), tuple(e[2] for e in picked), tuple(e[3] for e in picked)
    )


@settings(max_examples=1000)
@given(entries=_entries(), cut=st.tuples(st.integers(0, 20), st.integers(0, 20)), data=st.data())
def test_the_compiled_decoder_agrees_with_python(
    entries: list[list[Any]], cut: tuple[int, int], data: Any
) -> None:
    section = msgpack.packb(entries, use_bin_type=True)
    count = len(entries)
    lo, hi = sorted(min(c, count) for c in cut)
    assert sections.decode_section(memoryview(section), count, lo, hi) == _python(
        section, count, lo, hi
    )
    # Damaged (a flipped byte, or cut short): None is always allowed (the Python path then
    # names the error), anything else must be what the Python path makes of the same bytes.
    if section and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(section) - 1))
        damaged = bytearray(section)
        damaged[at] ^= data.draw(st.integers(1, 255))
    else:
        damaged = bytearray(section[: data.draw(st.integers(0, len(section)))])
    compiled = sections.decode_section(memoryview(damaged), count, lo, hi)
    assert compiled is None or compiled == _python(bytes(damaged), count, lo, hi)


def test_a_count_the_section_cannot_hold_is_refused_before_anything_is_sized() -> None:
    section = msgpack.packb([[0, 0, None, b"v", []]], use_bin_type=True)
    assert sections.decode_section(section, 2**40, 0, 1) is None
    assert sections.decode_section(section, 1, 0, 2) is None  # a cut beyond the count
    assert sections.decode_section(section, 1, 1, 0) is None
    assert sections.decode_section(section, 1, 0, 1) == _python(section, 1, 0, 1)
