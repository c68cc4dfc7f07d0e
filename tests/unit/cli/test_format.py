"""kcat format strings and the JSON envelope (client/cli/format.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from client.cli.format import (
    EnvelopeError,
    FormatError,
    ProducerInput,
    compile_format,
    decode_envelope,
    encode_envelope,
    format_table,
    split_key,
)


@dataclass(frozen=True)
class Rec:
    topic: str = "orders"
    partition: int = 2
    offset: int = 41
    timestamp: int = 1_700_000_000_123
    key: bytes | None = b"k1"
    value: bytes | None = b"hello"
    headers: tuple[tuple[str, bytes | None], ...] = ()


def test_every_kcat_token() -> None:
    render = compile_format("%t|%p|%o|%k|%s|%T|%K|%S|%%")
    assert render(Rec()) == b"orders|2|41|k1|hello|1700000000123|2|5|%"


def test_null_key_and_value_print_empty_and_size_minus_one() -> None:
    render = compile_format("[%k][%s] %K %S")
    assert render(Rec(key=None, value=None)) == b"[][] -1 -1"


def test_headers_as_name_value_csv() -> None:
    record = Rec(headers=(("a", b"1"), ("b", None), ("a", b"2")))
    assert compile_format("%h")(record) == b"a=1,b=,a=2"
    assert compile_format("%h")(Rec()) == b""


def test_escapes_and_raw_bytes() -> None:
    render = compile_format(r"%k\t%s\n\\")
    assert render(Rec(value=b"\xff\x00")) == b"k1\t\xff\x00\n\\"


@pytest.mark.parametrize("fmt", ["%x", "%", "abc\\", r"\q"])
def test_bad_formats_are_rejected_up_front(fmt: str) -> None:
    with pytest.raises(FormatError):
        compile_format(fmt)


def test_envelope_round_trip_text() -> None:
    record = Rec(headers=(("trace", b"abc"), ("empty", None)))
    line = encode_envelope(record)
    assert json.loads(line) == {
        "topic": "orders",
        "partition": 2,
        "offset": 41,
        "timestamp": 1_700_000_000_123,
        "key": "k1",
        "value": "hello",
        "headers": [{"key": "trace", "value": "abc"}, {"key": "empty", "value": None}],
    }
    assert decode_envelope(line) == ProducerInput(
        value=b"hello",
        key=b"k1",
        headers=(("trace", b"abc"), ("empty", None)),
        timestamp_ms=1_700_000_000_123,
    )


def test_envelope_binary_goes_base64_under_its_own_field() -> None:
    record = Rec(key=None, value=b"\xde\xad\xbe\xef", headers=(("bin", b"\xff"),))
    obj = json.loads(encode_envelope(record))
    assert obj["key"] is None
    assert "value" not in obj
    assert obj["value_b64"] == "3q2+7w=="
    assert obj["headers"] == [{"key": "bin", "value_b64": "/w=="}]
    back = decode_envelope(encode_envelope(record))
    assert (back.key, back.value, back.headers) == (None, b"\xde\xad\xbe\xef", (("bin", b"\xff"),))


def test_envelope_keeps_unicode_as_text() -> None:
    line = encode_envelope(Rec(value="héllo ☃".encode()))
    assert '"value":"héllo ☃"' in line
    assert decode_envelope(line.encode()).value == "héllo ☃".encode()


def test_minimal_envelope() -> None:
    assert decode_envelope('{"value": "v"}') == ProducerInput(value=b"v")
    assert decode_envelope('{"value": null, "key": "k"}') == ProducerInput(value=None, key=b"k")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ("[1]", "JSON object"),
        ('{"key": "k"}', "missing 'value'"),
        ('{"value": 5}', "string or null"),
        ('{"value": "a", "value_b64": "YQ=="}', "both"),
        ('{"value_b64": "***"}', "base64"),
        ('{"value": "v", "timestamp": -1}', "timestamp"),
        ('{"value": "v", "timestamp": true}', "timestamp"),
        ('{"value": "v", "headers": {"a": "b"}}', "headers"),
        ('{"value": "v", "headers": [{"value": "b"}]}', "header 0"),
    ],
)
def test_bad_envelopes(line: str, message: str) -> None:
    with pytest.raises(EnvelopeError, match=message):
        decode_envelope(line)


def test_split_key_at_first_separator() -> None:
    assert split_key(b"user:1:payload", b":") == ProducerInput(value=b"1:payload", key=b"user")
    assert split_key(b":v", b":") == ProducerInput(value=b"v", key=b"")
    with pytest.raises(EnvelopeError, match="no key separator"):
        split_key(b"no-separator", b":")


def test_format_table_aligns_columns_without_trailing_spaces() -> None:
    lines = format_table(
        ["Partition", "Isr", "LogEndOffsets"],
        [["0", "1,2,3", "1=10"], ["11", "-", "-"]],
        indent="  ",
    )
    assert lines == [
        "  Partition  Isr    LogEndOffsets",
        "  0          1,2,3  1=10",
        "  11         -      -",
    ]
    with pytest.raises(ValueError, match="2 cells"):
        format_table(["a", "b", "c"], [["1", "2"]])
