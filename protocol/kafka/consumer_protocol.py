"""The consumer protocol's embedded messages (Kafka's ConsumerProtocol): a member's
subscription in JoinGroup's protocol metadata and its assignment in SyncGroup's answer, each
an int16 version then the struct of that version (kio's ConsumerProtocolSubscription v0-3,
ConsumerProtocolAssignment v0-1). A later version is read as the newest known, as Kafka does."""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from kio.schema.consumer_protocol_assignment.v1.data import (
    ConsumerProtocolAssignment,
)
from kio.schema.consumer_protocol_assignment.v1.data import (
    TopicPartition as AssignedPartitions,
)
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from protocol.errors import ErrorCode, HighwaterError
from protocol.kafka.bounds import check_bounds
from protocol.topic_partition import TopicPartition

__all__ = ["Subscription", "decode_subscription", "encode_assignment", "encode_subscription"]

_VERSION: Final = struct.Struct(">h")
_SUBSCRIPTION_VERSIONS: Final = 3


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...]
    rack_id: str | None


@cache
def _subscription_class(version: int) -> Any:
    module = __import__(
        f"kio.schema.consumer_protocol_subscription.v{version}.data",
        fromlist=["ConsumerProtocolSubscription"],
    )
    return module.ConsumerProtocolSubscription


@cache
def _subscription_reader(version: int) -> Any:
    return entity_reader(_subscription_class(version))


def decode_subscription(metadata: bytes) -> Subscription:
    """INCONSISTENT_GROUP_PROTOCOL for bytes that are not a consumer subscription."""
    try:
        (version,) = _VERSION.unpack_from(metadata)
        if version < 0:
            raise ValueError(f"version {version}")
        known = min(version, _SUBSCRIPTION_VERSIONS)
        check_bounds(_subscription_class(known), memoryview(metadata), _VERSION.size)
        body, _ = _subscription_reader(known)(metadata, _VERSION.size)
    except Exception as exc:  # kio raises several kinds on bad bytes: each means the same
        raise HighwaterError(
            f"protocol metadata is not a consumer subscription: {exc}",
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ) from exc
    owned = tuple(
        TopicPartition(t.topic, p)
        for t in getattr(body, "owned_partitions", ())
        for p in t.partitions
    )
    return Subscription(version, tuple(body.topics), owned, getattr(body, "rack_id", None))


_ASSIGNMENT_WRITER: Final = entity_writer(ConsumerProtocolAssignment)


def encode_assignment(partitions: Iterable[TopicPartition], version: int = 0) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    assignment = ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            AssignedPartitions(topic=TopicName(t), partitions=tuple(i32(p) for p in sorted(ps)))
            for t, ps in sorted(by_topic.items())
        ),
        user_data=None,
    )
    out = io.BytesIO()
    out.write(_VERSION.pack(min(version, 1)))  # v0 and v1 have the same fields
    _ASSIGNMENT_WRITER(out, assignment)
    return out.getvalue()


def encode_subscription(topics: Iterable[str]) -> bytes:
    """A version 0 subscription (topics only), for DescribeGroups' member metadata."""
    out = io.BytesIO()
    out.write(_VERSION.pack(0))
    module = __import__(
        "kio.schema.consumer_protocol_subscription.v0.data",
        fromlist=["ConsumerProtocolSubscription"],
    )
    cls = module.ConsumerProtocolSubscription
    entity_writer(cls)(out, cls(topics=tuple(topics), user_data=None))
    return out.getvalue()
