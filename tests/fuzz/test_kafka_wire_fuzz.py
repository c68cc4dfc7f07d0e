"""A short pass of the Kafka listener's fuzz targets (tests/fuzz/kafka_wire.py) in `make test`."""

from __future__ import annotations

from tests.fuzz.kafka_wire import BATCHES, SEEDS, fuzz_batches, fuzz_requests


def test_every_advertised_request_has_a_seed_that_decodes() -> None:
    from broker.kafka.wire import KAFKA_WIRE

    for frame in SEEDS:
        KAFKA_WIRE.decode(frame)  # raises if a seed is not a valid request
        # a large request arrives in a writable buffer of its own (broker.server)
        KAFKA_WIRE.decode(bytearray(frame))


def test_seed_batches_convert() -> None:
    from protocol.kafka.records import from_kafka_batches

    for batch in BATCHES:
        assert from_kafka_batches(batch)


def test_mutated_requests_never_crash_the_decoder() -> None:
    fuzz_requests(3000, key=1)


def test_mutated_batches_never_crash_the_converter() -> None:
    fuzz_batches(3000, key=2)
