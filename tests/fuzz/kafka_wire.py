"""Fuzz the Kafka listener's decoder and translators: `python -m tests.fuzz.kafka_wire --inputs N`.

Inputs are valid Kafka requests (every advertised API and version, bodies from kio's own
writer) and valid Kafka record batches (aiokafka's builder, every codec), then cut, extended
or with bytes flipped. The check: `KAFKA_WIRE.decode` either gives a Call or raises
RequestDecodeError (the server then answers or closes that connection), and a produced
records section either converts or raises HighwaterError (the partition gets its error code).
Anything else is a crash. Hypothesis draws from a fixed seed, so a run repeats exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import struct
import sys
import uuid
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from broker.kafka.wire import KAFKA_WIRE
from protocol.codec import RequestDecodeError
from protocol.errors import HighwaterError
from protocol.kafka.frames import is_flexible, request_class
from protocol.kafka.records import from_kafka_batches
from protocol.kafka.versions import DECODED

__all__ = ["fuzz_batches", "fuzz_requests", "main"]


def _empty_body(cls: Any) -> Any:
    """The smallest instance kio's writer accepts: required fields at zero or empty."""
    import dataclasses
    import datetime
    import typing

    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            continue
        hint = hints[f.name]
        args = typing.get_args(hint)
        if type(None) in args:
            values[f.name] = None
        elif typing.get_origin(hint) is tuple:
            values[f.name] = ()
        elif isinstance(hint, type) and issubclass(hint, str):
            values[f.name] = ""
        elif hint is bytes:
            values[f.name] = b""
        elif hint is bool:
            values[f.name] = False
        elif hint is uuid.UUID:
            values[f.name] = uuid.UUID(int=0)
        elif isinstance(hint, type) and issubclass(hint, datetime.timedelta):
            values[f.name] = datetime.timedelta(0)
        else:
            values[f.name] = 0
    return cls(**values)


def _frame(api_key: int, version: int) -> bytes:
    header = struct.pack(">hhih", api_key, version, 1, 4) + b"fuzz"
    if is_flexible(api_key, version):
        header += b"\x00"
    cls = request_class(api_key, version)
    out = io.BytesIO()
    entity_writer(cls)(out, _empty_body(cls))
    return header + out.getvalue()


SEEDS = [_frame(k, v) for k, (low, high) in DECODED.items() for v in range(low, high + 1)]


def _batch(codec: int, count: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, 0, 7, 0, 0, 2**31 - 1)
    for i in range(count):
        builder.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"x")])
    return bytes(builder.build())


BATCHES = [_batch(codec, n) for codec in range(5) for n in (1, 3)]


@st.composite
def _mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "int"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(max_size=8))
        elif kind == "int" and len(data) >= pos + 4:
            data[pos : pos + 4] = struct.pack(">i", draw(st.sampled_from([-1, 2**31 - 1, 2**20])))
    return bytes(data)


def _drive(strategy: Any, target: Any, count: int, key: int) -> None:
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(key)
    @given(strategy)
    def run(value: bytes) -> None:
        target(value)

    run()


def _decode(frame: bytes) -> None:
    with contextlib.suppress(RequestDecodeError):
        KAFKA_WIRE.decode(frame)


def _convert(records: bytes) -> None:
    with contextlib.suppress(HighwaterError):
        from_kafka_batches(records, max_decompressed_bytes=1 << 20)


def fuzz_requests(count: int, key: int = 0) -> None:
    _drive(_mutated(SEEDS), _decode, count, key)


def fuzz_batches(count: int, key: int = 0) -> None:
    _drive(_mutated(BATCHES), _convert, count, key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    fuzz_requests(args.inputs // 2, args.seed)
    fuzz_batches(args.inputs - args.inputs // 2, args.seed)
    print(f"{args.inputs} inputs to the Kafka decoder and record converter: no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
