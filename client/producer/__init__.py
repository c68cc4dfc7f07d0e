"""The async producer (Kafka's KafkaProducer, RecordAccumulator and Sender, in trio)."""

from client.producer.producer import (
    COMPRESSIONS,
    MAX_IN_FLIGHT_BATCHES_PER_PARTITION,
    DeliveryFuture,
    IdempotenceState,
    PartitionSequences,
    Producer,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    estimate_record_bytes,
    increment_sequence,
)

__all__ = [
    "COMPRESSIONS",
    "MAX_IN_FLIGHT_BATCHES_PER_PARTITION",
    "DeliveryFuture",
    "IdempotenceState",
    "PartitionSequences",
    "Producer",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordMetadata",
    "estimate_record_bytes",
    "increment_sequence",
]
