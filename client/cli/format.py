"""Pure text formats of the CLI: kcat's `--format` strings, the JSON envelope, plain tables.

`consume --json` writes one envelope per record and `produce --json` reads the same envelope, so
a topic can be copied with a pipe. Keys, values and header values are JSON strings when the
bytes are valid UTF-8, null when null; other bytes go base64 under a field of their own
(`key_b64`, `value_b64`), the plain field then left out, so a reader never mistakes base64 text
for the data itself. Fields and an example: docs/operations.md ("JSON envelope").
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DEFAULT_FORMAT",
    "EnvelopeError",
    "FormatError",
    "ProducerInput",
    "RecordView",
    "compile_format",
    "decode_envelope",
    "encode_envelope",
    "format_headers",
    "format_table",
    "split_key",
]

DEFAULT_FORMAT = "%s\\n"

Headers = tuple[tuple[str, bytes | None], ...]


class RecordView(Protocol):
    """What a formatter reads from a consumed record (client.consumer.ConsumerRecord fits)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


class FormatError(ValueError):
    """A `--format` string with an unknown %-token or escape."""


class EnvelopeError(ValueError):
    """A `produce --json` input line that is not a valid envelope."""


# --- kcat format strings ----------------------------------------------------------------------

_Part = Callable[[RecordView], bytes]


def _text(value: object) -> bytes:
    return str(value).encode()


def _size(data: bytes | None) -> bytes:
    return b"-1" if data is None else _text(len(data))


def format_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    """kcat's %h: `name=value` pairs joined by commas; a null value prints as `name=`."""
    return b",".join(name.encode() + b"=" + (value or b"") for name, value in headers)


# kcat's tokens: %t topic, %p partition, %o offset, %k key, %s value, %T timestamp (ms),
# %h headers, %K key size, %S value size (-1 when null); %% is a literal percent sign.
_TOKENS: dict[str, _Part] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: _text(r.partition),
    "o": lambda r: _text(r.offset),
    "k": lambda r: r.key or b"",
    "s": lambda r: r.value or b"",
    "T": lambda r: _text(r.timestamp),
    "h": lambda r: format_headers(r.headers),
    "K": lambda r: _size(r.key),
    "S": lambda r: _size(r.value),
}
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\"}


def compile_format(fmt: str) -> Callable[[RecordView], bytes]:
    """Parse a kcat format once; the result renders one record as bytes (raw key/value bytes).

    Raises FormatError naming the bad token, so a typo fails before anything is consumed.
    """
    parts: list[_Part | bytes] = []
    literal = bytearray()
    i = 0
    while i < len(fmt):
        char = fmt[i]
        if char in "%\\" and i + 1 >= len(fmt):
            raise FormatError(f"format ends with a lone {char!r}")
        if char == "%":
            token = fmt[i + 1]
            if token == "%":
                literal += b"%"
            elif token in _TOKENS:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(_TOKENS[token])
            else:
                known = " ".join("%" + t for t in _TOKENS)
                raise FormatError(f"unknown format token %{token} (known: {known} %%)")
            i += 2
        elif char == "\\":
            escape = fmt[i + 1]
            if escape not in _ESCAPES:
                raise FormatError(f"unknown escape \\{escape} (known: \\n \\t \\r \\0 \\\\)")
            literal += _ESCAPES[escape]
            i += 2
        else:
            literal += char.encode()
            i += 1
    if literal:
        parts.append(bytes(literal))
    frozen = tuple(parts)

    def render(record: RecordView) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in frozen)

    return render


# --- the JSON envelope ----------------------------------------------------------------------


def _put_bytes(out: dict[str, Any], name: str, data: bytes | None) -> None:
    if data is None:
        out[name] = None
        return
    try:
        out[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        out[name + "_b64"] = base64.b64encode(data).decode("ascii")


def encode_envelope(record: RecordView) -> str:
    """One JSON line (without the newline) for `consume --json`."""
    out: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
    }
    _put_bytes(out, "key", record.key)
    _put_bytes(out, "value", record.value)
    headers = []
    for name, value in record.headers:
        header: dict[str, Any] = {"key": name}
        _put_bytes(header, "value", value)
        headers.append(header)
    out["headers"] = headers
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ProducerInput:
    """One record to produce, parsed from a stdin line."""

    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()
    timestamp_ms: int | None = None  # None: the producer stamps the current time


def _get_bytes(obj: dict[str, Any], name: str, where: str) -> bytes | None:
    b64_name = name + "_b64"
    if name in obj and b64_name in obj:
        raise EnvelopeError(f"{where}has both {name!r} and {b64_name!r}")
    if b64_name in obj:
        text = obj[b64_name]
        if not isinstance(text, str):
            raise EnvelopeError(f"{where}{b64_name!r} must be a base64 string")
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EnvelopeError(f"{where}{b64_name!r} is not valid base64") from exc
    text = obj.get(name)
    if text is None:
        return None
    if not isinstance(text, str):
        raise EnvelopeError(f"{where}{name!r} must be a string or null")
    return text.encode("utf-8")


def decode_envelope(line: str | bytes) -> ProducerInput:
    """Parse one `consume --json` line back into a record to produce.

    Keeps key, value, headers and timestamp. topic, partition and offset are ignored: the
    target topic is `produce`'s argument, the partition comes from --partition or the
    partitioner, and the offset from the target partition's leader.
    """
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise EnvelopeError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise EnvelopeError("expected a JSON object")
    if "value" not in obj and "value_b64" not in obj:
        raise EnvelopeError("missing 'value' (or 'value_b64')")
    timestamp = obj.get("timestamp")
    if timestamp is not None and (
        not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0
    ):
        raise EnvelopeError("'timestamp' must be a non-negative integer (ms) or null")
    raw_headers = obj.get("headers") or []
    if not isinstance(raw_headers, list):
        raise EnvelopeError('\'headers\' must be a list of {"key", "value"} objects')
    headers: list[tuple[str, bytes | None]] = []
    for i, header in enumerate(raw_headers):
        if not isinstance(header, dict) or not isinstance(header.get("key"), str):
            raise EnvelopeError(f"header {i} must be an object with a string 'key'")
        headers.append((header["key"], _get_bytes(header, "value", f"header {i}: ")))
    return ProducerInput(
        value=_get_bytes(obj, "value", ""),
        key=_get_bytes(obj, "key", ""),
        headers=tuple(headers),
        timestamp_ms=timestamp,
    )


# --- plain lines ----------------------------------------------------------------------------


def split_key(line: bytes, separator: bytes) -> ProducerInput:
    """`key<SEP>value` at the first separator (kafka-console-producer's parse.key)."""
    key, found, value = line.partition(separator)
    if not found:
        raise EnvelopeError(f"no key separator {separator.decode(errors='replace')!r} in line")
    return ProducerInput(value=value, key=key)


# --- tables -----------------------------------------------------------------------------------


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = ""
) -> list[str]:
    """Left-aligned columns two spaces apart, the header first; no trailing spaces.

    Cells must not be empty or contain spaces (use "-" for nothing), so `awk '{print $N}'`
    still finds column N on every line.
    """
    widths = [len(name) for name in header]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row {list(row)} has {len(row)} cells, the header {len(header)}")
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    return [
        indent
        + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (header, *rows)
    ]
