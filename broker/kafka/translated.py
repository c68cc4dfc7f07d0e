"""A Kafka request as its Highwater twin (broker.kafka.translate), and Kafka's topic ids as
Highwater's. Pure."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from protocol.kafka.frames import KafkaRequest
from protocol.messages.produce import ProducePartitionResponse
from protocol.topic_id import NO_TOPIC_ID, from_uuid

__all__ = ["NO_SUCH_TOPIC_ID", "Translated", "topic_id_of"]


@dataclass(frozen=True, slots=True)
class Translated:
    """A Kafka request as its Highwater twin, with what the response needs to go back."""

    api_key: int
    body: Any  # the Highwater request
    kafka: KafkaRequest
    # Produce: partitions refused before the handler (batches that did not convert).
    refused: tuple[tuple[str, ProducePartitionResponse], ...] = ()


def topic_id_of(value: uuid.UUID | None) -> str:
    """A Kafka topic id as Highwater's; the zero UUID (or null) as one no topic has."""
    text = from_uuid(value) if value is not None else NO_TOPIC_ID
    return text or NO_SUCH_TOPIC_ID


# The zero UUID asked for on Fetch v13+: never a topic's (protocol.topic_id), so the handler
# answers UNKNOWN_TOPIC_ID for it rather than reading it as a name.
NO_SUCH_TOPIC_ID: Final = "A" * 22
