"""Compiled message codecs: per (class, version), Python source generated from the schema.

`protocol.schema`'s wire types interpret a message field by field and build each field's path
for the error they might raise: about 15 µs per small message, on every request and response
(docs/performance.md). Here each (class, version) gets one generated encoder and decoder with
the same checks inline and no paths; when a check fails they raise `_Fallback`, and the
interpreted codec runs instead to raise its precise error. So both accept exactly the same
values and produce the same results, which tests/unit/protocol/test_schema_compile.py checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from protocol.schema import (
    MAX_STRING_BYTES,
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
from protocol.schema import decode_struct as interpreted_decode
from protocol.schema import encode_struct as interpreted_encode

__all__ = ["compiled_decoder", "compiled_encoder", "decode_struct", "encode_struct"]

T = TypeVar("T")


class _Fallback(Exception):
    """A value the generated code does not take as is: the interpreted codec decides."""


def encode_struct(value: object, version: int) -> dict[str, Any]:
    """`protocol.schema.encode_struct`, compiled."""
    try:
        result: dict[str, Any] = compiled_encoder(type(value), version)(value)
    except _Fallback:
        return interpreted_encode(value, version)
    return result


def decode_struct(cls: type[T], version: int, plain: Any) -> T:
    """`protocol.schema.decode_struct`, compiled."""
    try:
        result: T = compiled_decoder(cls, version)(plain)
    except (_Fallback, KeyError):
        return interpreted_decode(cls, version, plain)
    return result


class _Source:
    """Generated functions for one (class, version) and the structs it contains."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "enc" or "dec"
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"_Fallback": _Fallback}
        self.done: dict[tuple[type, int], str] = {}
        self._counter = 0

    def fresh(self, stem: str) -> str:
        self._counter += 1
        return f"{stem}{self._counter}"

    def bind(self, value: Any) -> str:
        name = self.fresh("_k")
        self.names[name] = value
        return name


def _int_check(src: _Source, var: str, wire: IntWire, encoding: bool) -> list[str]:
    lo, hi = wire.int_type.min, wire.int_type.max
    lines = []
    if encoding:  # int subclasses (ErrorCode, ApiKey) go out as plain ints; bool never does
        lines.append(f"if type({var}) is not int:")
        lines.append(f"    if isinstance({var}, int) and not isinstance({var}, bool):")
        lines.append(f"        {var} = int({var})")
        lines.append("    else:")
        lines.append("        raise _Fallback")
    else:
        lines.append(f"if type({var}) is not int:")
        lines.append("    raise _Fallback")
    lines.append(f"if not {lo} <= {var} <= {hi}:")
    lines.append("    raise _Fallback")
    return lines


def _field_code(src: _Source, var: str, wire: WireType) -> list[str]:
    """Lines that check `var` (and, for structs and lists, convert it in place)."""
    encoding = src.kind == "enc"
    if isinstance(wire, IntWire):
        return _int_check(src, var, wire, encoding)
    if isinstance(wire, BoolType):
        return [f"if type({var}) is not bool:", "    raise _Fallback"]
    if isinstance(wire, FloatType):  # an int to send: the checked path converts it
        return [f"if type({var}) is not float:", "    raise _Fallback"]
    if isinstance(wire, StrType):
        lines = [f"if type({var}) is not str:", "    raise _Fallback"]
        if encoding:  # schema.StrType.to_wire's length rule, cheap test first
            lines += [
                f"if len({var}) * 4 > {MAX_STRING_BYTES}"
                f" and len({var}.encode()) > {MAX_STRING_BYTES}:",
                "    raise _Fallback",
            ]
        return lines
    if isinstance(wire, BytesType):
        if encoding:
            return [
                f"if not isinstance({var}, (bytes, bytearray, memoryview)):",
                "    raise _Fallback",
            ]
        return [f"if type({var}) is not bytes:", "    raise _Fallback"]
    if isinstance(wire, NullableType):
        inner = _field_code(src, var, wire.inner)
        return [f"if {var} is not None:", *("    " + line for line in inner)]
    if isinstance(wire, ListType):
        return _list_code(src, var, wire)
    if isinstance(wire, StructType):
        fn = _struct_function(src, wire.cls, wire.version)
        return [f"{var} = {fn}({var})"]
    raise TypeError(f"no compiled form for {wire!r}")


def _list_code(src: _Source, var: str, wire: ListType) -> list[str]:
    encoding = src.kind == "enc"
    container = "(list, tuple)" if encoding else "list"
    check = f"type({var}) is not list" if not encoding else f"not isinstance({var}, {container})"
    lines = [f"if {check} or len({var}) > {wire.max_items}:", "    raise _Fallback"]
    make = "list" if encoding else "tuple"
    inner = wire.inner
    if isinstance(inner, StructType):
        fn = _struct_function(src, inner.cls, inner.version)
        lines.append(f"{var} = {make}(map({fn}, {var}))")
        return lines
    item = src.fresh("_i")
    body = _field_code(src, item, inner)
    out = src.fresh("_o")
    lines.append(f"{out} = []")
    lines.append(f"for {item} in {var}:")
    lines += ["    " + line for line in body]
    lines.append(f"    {out}.append({item})")
    lines.append(f"{var} = {make}({out})" if not encoding else f"{var} = {out}")
    return lines


def _struct_function(src: _Source, cls: type, version: int) -> str:
    key = (cls, version)
    if key in src.done:
        return src.done[key]
    name = src.fresh(f"_{src.kind}_{cls.__name__}_v{version}_")
    src.done[key] = name
    fields = struct_fields(cls, version)
    cls_name = src.bind(cls)
    variables = [f"v{i}" for i in range(len(fields))]
    body: list[str] = []
    if src.kind == "enc":
        body += [f"if type(o) is not {cls_name}:", "    raise _Fallback"]
        for var, f in zip(variables, fields, strict=True):
            body.append(f"{var} = o.{f.name}")
            body += _field_code(src, var, f.wire)
        items = ", ".join(f"{f.name!r}: {var}" for var, f in zip(variables, fields, strict=True))
        body.append(f"return {{{items}}}")
        args = "o"
    else:
        body += [f"if type(p) is not dict or len(p) != {len(fields)}:", "    raise _Fallback"]
        for var, f in zip(variables, fields, strict=True):
            body.append(f"{var} = p[{f.name!r}]")  # KeyError: a field is missing
            body += _field_code(src, var, f.wire)
        given = {f.name: var for var, f in zip(variables, fields, strict=True)}
        body += _build_code(src, cls, cls_name, given)
        args = "p"
    src.lines.append(f"def {name}({args}):")
    src.lines += ["    " + line for line in body]
    src.lines.append("")
    return name


def _build_code(src: _Source, cls: type, cls_name: str, given: dict[str, str]) -> list[str]:
    """Lines that return a `cls` from the variables in `given` (field name -> variable)."""
    if not _slot_settable(cls):
        kwargs = ", ".join(f"{name}={var}" for name, var in given.items())
        return [f"return {cls_name}({kwargs})"]
    # A frozen dataclass's __init__ sets each field through object.__setattr__, about 3x the
    # cost of calling the slot's own setter (docs/performance.md, "Encoding and decoding:
    # compiled codecs"). The result is
    # the same object: no __post_init__ to skip, and the defaults of fields this version
    # lacks are set below as __init__ would.
    lines = [f"o = {src.bind(object.__new__)}({cls_name})"]
    for dc_field in dataclasses.fields(cls):
        setter = src.bind(cls.__dict__[dc_field.name].__set__)
        if dc_field.name in given:
            value = given[dc_field.name]
        elif dc_field.default_factory is not dataclasses.MISSING:
            value = f"{src.bind(dc_field.default_factory)}()"
        elif dc_field.default is not dataclasses.MISSING:
            value = src.bind(dc_field.default)
        else:
            raise TypeError(f"{cls.__name__}.{dc_field.name}: not on the wire and no default")
        lines.append(f"{setter}(o, {value})")
    lines.append("return o")
    return lines


def _slot_settable(cls: type) -> bool:
    """A slotted dataclass whose __init__ only stores its arguments."""
    slots = cls.__dict__.get("__slots__", ())
    return (
        dataclasses.is_dataclass(cls)
        and not hasattr(cls, "__post_init__")
        and all(f.init and f.name in slots for f in dataclasses.fields(cls))
        and all(hasattr(c, "__dataclass_fields__") or c is object for c in cls.__mro__)
    )


def _compile(kind: str, cls: type, version: int) -> Callable[[Any], Any]:
    src = _Source(kind)
    name = _struct_function(src, cls, version)
    namespace = dict(src.names)
    exec(compile("\n".join(src.lines), f"<{kind} {cls.__name__} v{version}>", "exec"), namespace)
    function: Callable[[Any], Any] = namespace[name]
    return function


_ENCODERS: dict[tuple[type, int], Callable[[Any], Any]] = {}
_DECODERS: dict[tuple[type, int], Callable[[Any], Any]] = {}


def compiled_encoder(cls: type, version: int) -> Callable[[Any], Any]:
    """value -> its plain map; raises _Fallback where the interpreted encoder must decide."""
    fn = _ENCODERS.get((cls, version))
    if fn is None:
        fn = _ENCODERS[cls, version] = _compile("enc", cls, version)
    return fn


def compiled_decoder(cls: type, version: int) -> Callable[[Any], Any]:
    """plain map -> value; raises _Fallback or KeyError where the interpreted one decides."""
    fn = _DECODERS.get((cls, version))
    if fn is None:
        fn = _DECODERS[cls, version] = _compile("dec", cls, version)
    return fn
