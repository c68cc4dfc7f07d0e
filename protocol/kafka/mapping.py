"""Field-by-name conversion between kio's message classes and Highwater's (protocol.messages).

Highwater's messages already use the field names of Kafka's JSON specs, so most of an API's
translation is this: for each field of the target class, the source field of the same name
(or `name_ms` for kio's timedelta fields, as Highwater puts units last), converted by the
target's type (nested classes, tuples of them, error codes, milliseconds); a field the source
lacks takes the target's default. Per-API differences are written out in broker.kafka.
A conversion plan is built once per (source class, target class) and cached.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import types
import typing
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any, Final

from protocol.topic_id import to_uuid

__all__ = ["ZERO_UUID", "MappingError", "convert"]

ZERO_UUID: Final = uuid.UUID(int=0)  # a topic without an id (protocol.topic_id)

_Convert = Callable[[Any], Any]
_NO_FILLER: Final = object()


class MappingError(TypeError):
    """A target field with no source value and no default: a translation bug, not bad input."""


def convert(value: Any, target: Any) -> Any:
    """`value` (a dataclass instance) as an instance of the dataclass `target`."""
    source: Any = type(value)
    return _plan(source, target)(value)


@cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=False)


@cache
def _plan(source: Any, target: Any) -> _Convert:
    source_fields = {f.name for f in dataclasses.fields(source)}
    source_hints = _hints(source)
    steps: list[tuple[str, str, _Convert]] = []
    for f in dataclasses.fields(target):
        hint = _hints(target)[f.name]
        if f.name in source_fields:
            step = _converter(source_hints[f.name], hint)
            if f.default is not dataclasses.MISSING and not _strip_optional(hint)[1]:
                step = _none_as_default(step, f.default)  # e.g. Fetch's diverging_epoch
            steps.append((f.name, f.name, step))
        elif f.name + "_ms" in source_fields and _is_time(_strip_optional(hint)[0]):
            steps.append((f.name, f.name + "_ms", _converter(int, hint)))
        elif f.name.endswith("_ms") and f.name[:-3] in source_fields:
            steps.append((f.name, f.name[:-3], _converter(source_hints[f.name[:-3]], hint)))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            filler = _filler(hint)
            if filler is _NO_FILLER:
                raise MappingError(f"{target.__name__}.{f.name} has no source in {source.__name__}")
            steps.append((f.name, "", _constant(filler)))

    def run(value: Any) -> Any:
        return target(
            **{name: step(getattr(value, src) if src else None) for name, src, step in steps}
        )

    return run


def _none_as_default(step: _Convert, default: Any) -> _Convert:
    def convert_or_default(value: Any) -> Any:
        return default if value is None else step(value)

    return convert_or_default


def _constant(value: Any) -> _Convert:
    def constant(_: Any) -> Any:
        return value

    return constant


def _filler(hint: Any) -> Any:
    """A value for a required target field the source does not have, where one is obvious."""
    args = typing.get_args(hint)
    if hint is uuid.UUID or uuid.UUID in args:
        return ZERO_UUID  # a message without a topic id (KIP-516)
    if _is_timedelta(hint):
        return datetime.timedelta(0)
    if _is_tuple(_strip_optional(hint)[0]):
        return ()  # an empty list, never null: the Java clients read some without a null check
    if type(None) in args:
        return None
    return _NO_FILLER


def _is_timedelta(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, datetime.timedelta)


def _is_time(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, datetime.timedelta | datetime.datetime)


def _from_epoch_ms(value: int) -> datetime.datetime | None:
    return None if value < 0 else datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)


def _is_tuple(hint: Any) -> bool:
    return typing.get_origin(hint) is tuple


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def _converter(source_hint: Any, target_hint: Any) -> _Convert:
    target, optional = _strip_optional(target_hint)
    source, _ = _strip_optional(source_hint)
    inner = _plain_converter(source, target)
    if inner is None:
        return _identity
    if optional:
        return lambda v: None if v is None else inner(v)
    return inner


def _identity(value: Any) -> Any:
    return value


def _plain_converter(source: Any, target: Any) -> _Convert | None:
    if _is_tuple(target):
        target_item = typing.get_args(target)[0]
        source_item = typing.get_args(source)[0] if _is_tuple(source) else Any
        item = _plain_converter(_strip_optional(source_item)[0], _strip_optional(target_item)[0])
        if item is None:
            return None
        return lambda v: tuple(map(item, v))
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        if dataclasses.is_dataclass(source) and isinstance(source, type):
            return _plan(source, target)
        return lambda v: convert(v, target)
    if target is uuid.UUID and source is str:
        return to_uuid  # a topic id (KIP-516) in Highwater's string form
    if _is_timedelta(target):
        return lambda v: datetime.timedelta(milliseconds=v)
    if isinstance(target, type) and issubclass(target, datetime.datetime):
        return _from_epoch_ms
    if _is_timedelta(source):
        return lambda v: int(v.total_seconds() * 1000)
    if isinstance(target, type) and issubclass(target, enum.IntEnum):
        return target
    if isinstance(source, type) and issubclass(source, enum.IntEnum):
        return int
    return None
