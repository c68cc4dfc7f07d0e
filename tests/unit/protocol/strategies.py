"""Hypothesis strategies derived from the protocol's own schemas, plus shared helpers.

Strategies are built from `protocol.schema.struct_fields(cls, version)` and the WireType of each
field, so a new message, field or version is covered without touching the tests. Sizes are kept
small (lists of at most 3 items, short strings) so the whole directory runs in seconds.
"""

from __future__ import annotations

import dataclasses
import struct
from functools import cache
from typing import Any, Final

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from protocol.apis import APIS, ApiSpec
from protocol.records import CRC_START, crc32c
from protocol.schema import (
    BoolType,
    BytesType,
    FloatType,
    IntWire,
    ListType,
    NullableType,
    StrType,
    StructType,
    WireType,
    struct_fields,
)

MAX_LIST_ITEMS: Final = 3
MAX_STR_CHARS: Final = 6
MAX_BIN_BYTES: Final = 12
# Larger than any version a message will ever have: struct_fields(cls, ALL_FIELDS) is every field.
ALL_FIELDS: Final = 1 << 15

# Shared settings: few examples per (api, version) pair keeps the suite fast; no deadline so a
# slow CI machine does not turn into flaky failures.
FAST: Final = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
THOROUGH: Final = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def api_versions() -> list[tuple[ApiSpec, int]]:
    """Every (api, version) pair the protocol supports."""
    return [
        (spec, version)
        for spec in APIS.values()
        for version in range(spec.min_version, spec.max_version + 1)
    ]


def api_version_id(case: tuple[ApiSpec, int]) -> str:
    spec, version = case
    return f"{spec.key.name}-v{version}"


@cache
def wire_strategy(wire: WireType) -> st.SearchStrategy[Any]:
    """Values of the Python type a field with this wire type holds."""
    if isinstance(wire, IntWire):
        return st.integers(wire.int_type.min, wire.int_type.max)
    if isinstance(wire, BoolType):
        return st.booleans()
    if isinstance(wire, FloatType):
        return st.floats(allow_nan=False)  # NaN != NaN: a round trip could not compare it
    if isinstance(wire, StrType):
        return st.text(max_size=MAX_STR_CHARS)
    if isinstance(wire, BytesType):
        return st.binary(max_size=MAX_BIN_BYTES)
    if isinstance(wire, NullableType):
        return st.none() | wire_strategy(wire.inner)
    if isinstance(wire, ListType):
        return st.lists(
            wire_strategy(wire.inner), max_size=min(MAX_LIST_ITEMS, wire.max_items)
        ).map(tuple)
    if isinstance(wire, StructType):
        return struct_strategy(wire.cls, wire.version)
    raise TypeError(f"no strategy for wire type {wire!r}: teach tests/unit/protocol/strategies.py")


@cache
def struct_strategy(cls: type, version: int) -> st.SearchStrategy[Any]:
    """Instances of `cls` whose fields present at `version` are random; the rest are defaults."""
    fields = struct_fields(cls, version)
    return st.fixed_dictionaries({f.name: wire_strategy(f.wire) for f in fields}).map(
        lambda kwargs: cls(**kwargs)
    )


def project(value: Any, wire: WireType) -> Any:
    """What `value` becomes after encoding and decoding with `wire`.

    Fields a struct does not have at the wire's version go back to their defaults (the wire
    never carried them); everything else is unchanged.
    """
    if isinstance(wire, NullableType):
        return None if value is None else project(value, wire.inner)
    if isinstance(wire, ListType):
        return tuple(project(item, wire.inner) for item in value)
    if isinstance(wire, StructType):
        present = {f.name: f.wire for f in wire.fields}
        kwargs = {}
        for dc_field in dataclasses.fields(wire.cls):
            if dc_field.name in present:
                kwargs[dc_field.name] = project(
                    getattr(value, dc_field.name), present[dc_field.name]
                )
            elif dc_field.default is not dataclasses.MISSING:
                kwargs[dc_field.name] = dc_field.default
            else:
                factory = dc_field.default_factory
                assert callable(factory), f"{wire.cls.__name__}.{dc_field.name} has no default"
                kwargs[dc_field.name] = factory()
        return wire.cls(**kwargs)
    return value


# ---------------------------------------------------------------------------------------------
# Record batch helpers.


def recompute_crc(batch: bytes | bytearray) -> bytes:
    """Rewrite a batch's CRC so it matches bytes [21, end): only the other damage remains."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[CRC_START:])))
    return bytes(out)


def flip_bit(data: bytes, index: int, bit: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 1 << bit
    return bytes(out)
