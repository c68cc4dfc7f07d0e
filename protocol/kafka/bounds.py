"""Every length a Kafka message declares, checked against the bytes that follow it, before
kio's reader sees the message.

kio's native reader sets aside room for an array from the count the message declares: a
CreateTopics request declaring 4 billion topics in a few bytes made it ask for 200 GB and
abort the process (found by tests/fuzz/kafka_wire.py). Kafka refused exactly this after
CVE-2022-34917. So the same schema (kio's classes: field order, `kafka_type`, tags,
flexibility) is walked here first without building anything: each array's count, string's and
bytes' length and tagged field's size must fit in what is left, else `BoundsError`.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Final

__all__ = ["BoundsError", "check_bounds"]

_FIXED: Final = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")

# (buffer, position, end) -> the position after the value
_Walk = Callable[[memoryview, int, int], int]


class BoundsError(ValueError):
    """A declared length that runs past the message."""


def check_bounds(cls: Any, buffer: memoryview, offset: int) -> int:
    """Walk one `cls` (kio's class) at `offset`; the offset after it. BoundsError if a
    declared length does not fit."""
    return _entity(cls)(buffer, offset, len(buffer))


def _uvarint(buffer: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise BoundsError("a varint runs past the end")
        byte = buffer[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise BoundsError("a varint longer than 10 bytes")


def _fits(count: int, pos: int, end: int, what: str) -> None:
    if count > end - pos:
        raise BoundsError(f"{what} declares {count}, only {end - pos} bytes follow")


def _fixed(size: int) -> _Walk:
    def walk(buffer: memoryview, pos: int, end: int) -> int:
        _fits(size, pos, end, "a field")
        return pos + size

    return walk


def _sized(flexible: bool, legacy: struct.Struct) -> _Walk:
    """A string or bytes: compact (uvarint length + 1, 0 for null) or legacy (int16/int32
    length, -1 for null)."""

    def walk(buffer: memoryview, pos: int, end: int) -> int:
        if flexible:
            length, pos = _uvarint(buffer, pos, end)
            length -= 1
        else:
            _fits(legacy.size, pos, end, "a length")
            (length,) = legacy.unpack_from(buffer, pos)
            pos += legacy.size
        if length < 0:
            return pos  # null
        _fits(length, pos, end, "a string or bytes")
        return pos + length

    return walk


def _primitive(kafka_type: str, flexible: bool) -> _Walk:
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type])
    if kafka_type == "string":
        return _sized(flexible, _INT16)
    if kafka_type in ("bytes", "records"):
        return _sized(flexible, _INT32)
    raise TypeError(f"no bounds for kafka_type {kafka_type!r}")


def _array(item: _Walk, flexible: bool) -> _Walk:
    def walk(buffer: memoryview, pos: int, end: int) -> int:
        if flexible:
            count, pos = _uvarint(buffer, pos, end)
            count -= 1
        else:
            _fits(4, pos, end, "an array count")
            (count,) = _INT32.unpack_from(buffer, pos)
            pos += 4
        if count < 0:
            return pos  # null
        _fits(count, pos, end, "an array")  # every element takes a byte at least
        for _ in range(count):
            pos = item(buffer, pos, end)
        return pos

    return walk


def _nullable_entity(inner: _Walk) -> _Walk:
    def walk(buffer: memoryview, pos: int, end: int) -> int:
        _fits(1, pos, end, "a struct's marker")
        marker = buffer[pos]
        return pos + 1 if marker == 0xFF else inner(buffer, pos + 1, end)

    return walk


def _optional_args(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def _field_walk(field: dataclasses.Field[Any], hint: Any, flexible: bool) -> _Walk:
    kafka_type = field.metadata.get("kafka_type")
    base, nullable = _optional_args(hint)
    if typing.get_origin(base) is tuple:
        (item_type, _) = typing.get_args(base)
        item = (
            _primitive(kafka_type, flexible)
            if kafka_type is not None
            else _entity(_optional_args(item_type)[0])
        )
        return _array(item, flexible)
    if kafka_type is not None:
        return _primitive(kafka_type, flexible)
    inner = _entity(base)
    return _nullable_entity(inner) if nullable else inner


@cache
def _entity(cls: Any) -> _Walk:
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    plain: list[_Walk] = []
    tagged: dict[int, _Walk] = {}
    for f in dataclasses.fields(cls):
        # Request header v2 keeps client_id a legacy string (Kafka's clientId has no
        # flexible versions), as kio's own reader does.
        legacy = cls.__name__ == "RequestHeader" and f.name == "client_id"
        walk = _field_walk(f, hints[f.name], flexible and not legacy)
        if "tag" in f.metadata:
            tagged[f.metadata["tag"]] = walk
        else:
            plain.append(walk)

    def walk_entity(buffer: memoryview, pos: int, end: int) -> int:
        for step in plain:
            pos = step(buffer, pos, end)
        if flexible:
            count, pos = _uvarint(buffer, pos, end)
            _fits(count, pos, end, "tagged fields")
            for _ in range(count):
                tag, pos = _uvarint(buffer, pos, end)
                size, pos = _uvarint(buffer, pos, end)
                _fits(size, pos, end, "a tagged field")
                known = tagged.get(tag)
                if known is not None:
                    known(buffer, pos, pos + size)  # within its own bytes
                pos += size
        return pos

    return walk_entity
