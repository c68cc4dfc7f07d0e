"""The java.util.Properties text format, as `Properties.load` reads it: server.properties
for the broker, Kafka's `--command-config` client files for the CLI. One parser for both, so
an escape or a continued line means the same in each. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = ["PropertiesFormatError", "parse_properties", "property_lines"]


class PropertiesFormatError(ValueError):
    """Text that is not valid .properties (a malformed \\uxxxx escape), naming the line."""


_WHITESPACE: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """Parse java .properties text (as `java.util.Properties.load` does); later keys win.

    `key=value`, `key: value` or `key value`; `#`/`!` comment lines; a line ending in an odd
    number of backslashes continues on the next (whose leading whitespace is dropped); escapes
    `\\t \\n \\r \\f \\uXXXX`, and `\\x` is `x` otherwise. Values are trimmed, as Kafka trims
    the values it parses.
    """
    return {key: value for _, key, value in property_lines(text, source)}


def property_lines(text: str, source: str = "<string>") -> Iterator[tuple[int, str, str]]:
    """(1-based line number, key, value) for each logical line that holds a property."""
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line_number = i + 1
        logical = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not logical or logical[0] in "#!":
            continue  # comments are natural lines: a trailing backslash does not continue them
        while _continues(logical):
            logical = logical[:-1]
            if i == len(lines):
                break
            logical += lines[i].lstrip(_WHITESPACE)
            i += 1
        key, value = _split_key_value(logical)
        try:
            yield line_number, _unescape(key).strip(), _unescape(_rstrip_unescaped(value))
        except ValueError as e:
            raise PropertiesFormatError(f"{source} line {line_number}: {e}") from None


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace, as Properties.load does."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _rstrip_unescaped(value: str) -> str:
    """Drop trailing whitespace, but keep an escaped one ("a\\ " stays "a\\ ")."""
    stripped = value.rstrip(_WHITESPACE)
    if len(stripped) < len(value) and _continues(stripped):  # odd backslashes: escaped space
        return value[: len(stripped) + 1]
    return stripped


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 == len(raw):
            break  # a lone trailing backslash is dropped, as in Java
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx escape {raw[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
