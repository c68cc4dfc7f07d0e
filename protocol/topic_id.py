"""Topic IDs (KIP-516): a random UUID per topic, written as Kafka's `Uuid.toString` does.

Highwater's own messages and the topic znode carry the string form (22 characters of
unpadded base64url); the Kafka listener converts it to the 16 bytes Kafka's wire carries.
An empty string in a Highwater message means "no id" (Kafka's zero UUID).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable
from typing import Final

__all__ = [
    "METADATA_TOPIC_ID",
    "NO_TOPIC_ID",
    "ZERO_UUID",
    "from_uuid",
    "new_topic_id",
    "parse_topic_id",
    "to_uuid",
]

ZERO_UUID: Final = uuid.UUID(int=0)
# Kafka's Uuid.METADATA_TOPIC_ID (= ONE_UUID): reserved for KRaft's metadata log.
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)
_RESERVED: Final = frozenset({ZERO_UUID, METADATA_TOPIC_ID})
NO_TOPIC_ID: Final = ""  # a Highwater message's "no id"


def from_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: the 16 bytes, base64url without padding."""
    if value == ZERO_UUID:
        return NO_TOPIC_ID
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString. Raises ValueError for anything but 16 bytes' worth."""
    if text == NO_TOPIC_ID:
        return ZERO_UUID
    if len(text) != 22:
        raise ValueError(f"topic id {text!r} is not 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"topic id {text!r} is not base64url") from exc
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def to_uuid(text: str) -> uuid.UUID:
    """A Highwater message's id as a Kafka UUID: an unreadable one is the zero UUID."""
    try:
        return parse_topic_id(text)
    except ValueError:
        return ZERO_UUID


def new_topic_id(random_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A fresh id, as Kafka's Uuid.randomUuid: never a reserved UUID, and never one whose
    string starts with "-" (a command line would read it as an option)."""
    while True:
        value = random_uuid()
        if value not in _RESERVED and not from_uuid(value).startswith("-"):
            return from_uuid(value)
