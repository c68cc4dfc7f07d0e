"""Versioned message schemas, defined once as frozen dataclasses whose annotations give the
wire type (`Int16`, `Int32`, `X | None`, `tuple[X, ...]`; `Annotated[Int32, Since(1)]` for a
field that exists from version 1 on, with the default used when decoding an older version).

On the wire a message is a msgpack map from field name to value. Decoding is strict: exactly
the fields of that version, each of the right type and range, else InvalidRequestError naming
the field path. Codecs are compiled once per (class, version).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Final, TypeVar, Union, get_args, get_origin

from protocol.errors import InvalidRequestError

__all__ = [
    "MAX_ITEMS_DEFAULT",
    "MAX_STRING_BYTES",
    "BoolType",
    "BytesType",
    "FloatType",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "IntType",
    "ListType",
    "MaxItems",
    "NullableType",
    "Since",
    "StrType",
    "StructType",
    "WireType",
    "decode_struct",
    "encode_struct",
    "struct_fields",
]

# Default bound on any list in a message (the frame size bounds it too; this keeps a small
# frame from describing a huge, cheap-to-send collection).
MAX_ITEMS_DEFAULT: Final = 100_000


@dataclass(frozen=True, slots=True)
class IntType:
    bits: int

    @property
    def min(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def max(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def name(self) -> str:
        return f"int{self.bits}"


@dataclass(frozen=True, slots=True)
class Since:
    """The field exists from this version on."""

    version: int


@dataclass(frozen=True, slots=True)
class MaxItems:
    """A tighter bound on a list field's length."""

    count: int


Int8 = Annotated[int, IntType(8)]
Int16 = Annotated[int, IntType(16)]
Int32 = Annotated[int, IntType(32)]
Int64 = Annotated[int, IntType(64)]


# ---------------------------------------------------------------------------------------------
# Wire types: each converts a Python value to its plain msgpack form and back, validating.


class WireType:
    name: str = "?"

    def to_wire(self, value: Any, path: str) -> Any:
        raise NotImplementedError

    def from_wire(self, value: Any, path: str) -> Any:
        raise NotImplementedError


def _fail(path: str, expected: str, value: Any) -> InvalidRequestError:
    return InvalidRequestError(f"field {path}: expected {expected}, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class IntWire(WireType):
    int_type: IntType

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.int_type.name

    def to_wire(self, value: Any, path: str) -> Any:
        # Encoding accepts int subclasses (ErrorCode, ApiKey) and sends them as plain ints;
        # decoding stays strict. bool is never an int here.
        if isinstance(value, int) and not isinstance(value, bool):
            value = int(value)
        return self.from_wire(value, path)

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not int:
            raise _fail(path, self.int_type.name, value)
        if not self.int_type.min <= value <= self.int_type.max:
            raise InvalidRequestError(f"field {path}: {value} out of range for {self.name}")
        return value


class BoolType(WireType):
    name = "bool"

    def to_wire(self, value: Any, path: str) -> Any:
        return self.from_wire(value, path)

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not bool:
            raise _fail(path, "bool", value)
        return value


class FloatType(WireType):
    """Kafka's float64 (a quota's value): msgpack's double; an int is sent as one."""

    name = "float64"

    def to_wire(self, value: Any, path: str) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _fail(path, "float64", value)

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not float:
            raise _fail(path, "float64", value)
        return value


# Kafka strings are at most 32767 bytes (int16 length); so are ours, on both sides.
MAX_STRING_BYTES: Final = 32767


class StrType(WireType):
    name = "str"

    def to_wire(self, value: Any, path: str) -> Any:
        self.from_wire(value, path)
        # Cheap first test: a str of n characters encodes to at most 4n bytes.
        if len(value) * 4 > MAX_STRING_BYTES and len(value.encode()) > MAX_STRING_BYTES:
            raise InvalidRequestError(f"field {path}: longer than {MAX_STRING_BYTES} bytes")
        return value

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not str:
            raise _fail(path, "str", value)
        return value


class BytesType(WireType):
    name = "bin"

    def to_wire(self, value: Any, path: str) -> Any:
        if isinstance(value, bytes | bytearray | memoryview):
            return value
        raise _fail(path, "bin", value)

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not bytes:
            raise _fail(path, "bin", value)
        return value


@dataclass(frozen=True, slots=True)
class NullableType(WireType):
    inner: WireType

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.inner.name} | nil"

    def to_wire(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.to_wire(value, path)

    def from_wire(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.from_wire(value, path)


@dataclass(frozen=True, slots=True)
class ListType(WireType):
    inner: WireType
    max_items: int = MAX_ITEMS_DEFAULT

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"array of {self.inner.name}"

    def to_wire(self, value: Any, path: str) -> Any:
        if not isinstance(value, list | tuple):
            raise _fail(path, "array", value)
        self._check_len(value, path)
        to_wire = self.inner.to_wire
        return [to_wire(item, f"{path}[{i}]") for i, item in enumerate(value)]

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not list:
            raise _fail(path, "array", value)
        self._check_len(value, path)
        from_wire = self.inner.from_wire
        return tuple(from_wire(item, f"{path}[{i}]") for i, item in enumerate(value))

    def _check_len(self, value: list[Any] | tuple[Any, ...], path: str) -> None:
        if len(value) > self.max_items:
            raise InvalidRequestError(
                f"field {path}: {len(value)} items, more than the limit {self.max_items}"
            )


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    wire: WireType
    since: int


@dataclass(frozen=True, slots=True)
class StructType(WireType):
    cls: type
    version: int

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.cls.__name__

    @property
    def fields(self) -> tuple[Field, ...]:
        return struct_fields(self.cls, self.version)

    def to_wire(self, value: Any, path: str) -> Any:
        if type(value) is not self.cls:
            raise _fail(path, self.cls.__name__, value)
        return {
            f.name: f.wire.to_wire(getattr(value, f.name), f"{path}.{f.name}" if path else f.name)
            for f in self.fields
        }

    def from_wire(self, value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _fail(path or self.cls.__name__, "map", value)
        fields = self.fields
        if len(value) != len(fields) or any(f.name not in value for f in fields):
            _raise_field_mismatch(self.cls, self.version, value, fields, path)
        kwargs = {
            f.name: f.wire.from_wire(value[f.name], f"{path}.{f.name}" if path else f.name)
            for f in fields
        }
        return self.cls(**kwargs)


def _raise_field_mismatch(
    cls: type, version: int, value: dict[Any, Any], fields: tuple[Field, ...], path: str
) -> typing.NoReturn:
    expected = {f.name for f in fields}
    missing = sorted(expected - value.keys())
    extra = sorted(repr(k) for k in value.keys() - expected)
    where = path or cls.__name__
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    if extra:
        parts.append(f"unexpected {', '.join(extra)}")
    raise InvalidRequestError(f"{where} (v{version}): {'; '.join(parts)}")


# ---------------------------------------------------------------------------------------------
# Compiling annotations into wire types.

_BOOL: Final = BoolType()
_FLOAT: Final = FloatType()
_STR: Final = StrType()
_BYTES: Final = BytesType()


def _wire_for(annotation: Any, version: int, where: str) -> tuple[WireType, int]:
    """Return (wire type, since-version) for one annotation."""
    since = 0
    max_items = MAX_ITEMS_DEFAULT
    int_type: IntType | None = None
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        for extra in extras:
            if isinstance(extra, Since):
                since = extra.version
            elif isinstance(extra, MaxItems):
                max_items = extra.count
            elif isinstance(extra, IntType):
                int_type = extra
        annotation = base
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1 or len(get_args(annotation)) != 2:
            raise TypeError(f"{where}: only `X | None` unions are supported")
        inner, _ = _wire_for(args[0], version, where)
        return NullableType(inner), since
    if origin in (list, tuple):
        (item,) = [a for a in get_args(annotation) if a is not Ellipsis]
        inner, _ = _wire_for(item, version, where)
        return ListType(inner, max_items), since
    if annotation is int:
        if int_type is None:
            raise TypeError(f"{where}: ints need a width (Int8/Int16/Int32/Int64)")
        return IntWire(int_type), since
    if annotation is bool:
        return _BOOL, since
    if annotation is float:
        return _FLOAT, since
    if annotation is str:
        return _STR, since
    if annotation is bytes:
        return _BYTES, since
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return StructType(annotation, version), since
    raise TypeError(f"{where}: unsupported annotation {annotation!r}")


@cache
def struct_fields(cls: type, version: int) -> tuple[Field, ...]:
    """The fields of `cls` present at `version`, in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for dc_field in dataclasses.fields(cls):
        wire, since = _wire_for(hints[dc_field.name], version, f"{cls.__name__}.{dc_field.name}")
        if (
            since > 0
            and dc_field.default is dataclasses.MISSING
            and dc_field.default_factory is dataclasses.MISSING
        ):
            raise TypeError(f"{cls.__name__}.{dc_field.name}: a Since field needs a default")
        if version >= since:
            out.append(Field(dc_field.name, wire, since))
    return tuple(out)


T = TypeVar("T")


def encode_struct(value: object, version: int) -> dict[str, Any]:
    """Validate `value` and turn it into its plain (msgpack-ready) map for `version`."""
    result: dict[str, Any] = StructType(type(value), version).to_wire(value, "")
    return result


def decode_struct(cls: type[T], version: int, plain: Any) -> T:
    """Validate a plain map against `cls` at `version` and build the dataclass."""
    result: T = StructType(cls, version).from_wire(plain, "")
    return result
