"""murmur2 against Kafka's own vectors, key placement stability, and the sticky partitioner."""

from __future__ import annotations

import random

import pytest

from client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (Java client reference values).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_is_a_signed_32_bit_int() -> None:
    for n in range(200):
        h = murmur2(random.Random(n).randbytes(n))
        assert -(2**31) <= h < 2**31


def test_partition_for_key_is_kafkas_to_positive_modulo() -> None:
    assert to_positive(-790332482) == 1357151166
    assert partition_for_key(b"foobar", 10) == 1357151166 % 10 == 6
    assert partition_for_key(b"foobar", 50) == 16
    for key, h in KAFKA_VECTORS:
        assert partition_for_key(key, 12) == (h & 0x7FFFFFFF) % 12


def test_partition_for_key_is_stable_and_spreads() -> None:
    keys = [f"key-{i}".encode() for i in range(3000)]
    first = [partition_for_key(k, 6) for k in keys]
    assert first == [partition_for_key(k, 6) for k in keys]
    counts = [first.count(p) for p in range(6)]
    assert min(counts) > 3000 / 6 * 0.8  # roughly even


def test_partition_for_key_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_sticky_stays_until_batch_size_bytes_then_moves() -> None:
    sticky = StickyPartitioner(batch_size=100, rng=random.Random(7))
    first = sticky.partition("t", 4)
    for _ in range(9):
        assert sticky.partition("t", 4) == first
        sticky.record_appended("t", first, 10)
    sticky.record_appended("t", first, 10)  # 100 bytes now
    second = sticky.partition("t", 4)
    assert second != first


def test_sticky_prefers_partitions_with_a_leader() -> None:
    sticky = StickyPartitioner(batch_size=1, rng=random.Random(1))
    seen = set()
    for _ in range(50):
        p = sticky.partition("t", 6, lambda: [2, 5])
        sticky.record_appended("t", p, 10)
        seen.add(p)
    assert seen == {2, 5}


def test_sticky_topics_are_independent() -> None:
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(3))
    a = sticky.partition("a", 100)
    sticky.partition("b", 100)
    assert sticky.partition("a", 100) == a
