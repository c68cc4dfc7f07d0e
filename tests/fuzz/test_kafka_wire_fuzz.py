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


def test_a_count_past_the_message_is_refused_before_kio_allocates_for_it() -> None:
    import pytest

    from broker.kafka.wire import KAFKA_WIRE
    from protocol.codec import RequestDecodeError

    # CreateTopics v6 declaring about 4 billion topics in 2 bytes: kio's reader asked for
    # 200 GB and aborted the process (the fuzz target found it).
    frame = bytes.fromhex("0013000600000001000466757a7a0091ffffff600000")
    with pytest.raises(RequestDecodeError, match="declares"):
        KAFKA_WIRE.decode(frame)


def test_a_subscription_declaring_more_topics_than_its_bytes_is_refused() -> None:
    import pytest

    from protocol.errors import ErrorCode, HighwaterError
    from protocol.kafka.consumer_protocol import decode_subscription

    with pytest.raises(HighwaterError) as refused:
        decode_subscription(b"\x00\x00\x7f\xff\xff\xff" + b"\x00" * 8)
    assert refused.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
