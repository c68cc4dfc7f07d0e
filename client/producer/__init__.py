"""The async producer, split along Kafka's classes: `batch` (ProducerBatch and the records'
futures), `accumulator` (RecordAccumulator), `idempotence` (the idempotent half of
TransactionManager), `sender` (Sender; with `answers`, `producer_id` and `retry_notices`) and
`producer` (KafkaProducer: the public Producer).
"""

from client.producer.accumulator import RecordAccumulator
from client.producer.batch import (
    DeliveryFuture,
    ProducerBatch,
    RecordMetadata,
    estimate_record_bytes,
    increment_sequence,
)
from client.producer.idempotence import (
    MAX_IN_FLIGHT_BATCHES_PER_PARTITION,
    IdempotenceState,
    PartitionSequences,
)
from client.producer.producer import Producer
from client.producer.retry_notices import RETRY_NOTICE_INTERVAL_MS, RetryNotice
from client.producer.sender import CloseResult

__all__ = [
    "MAX_IN_FLIGHT_BATCHES_PER_PARTITION",
    "RETRY_NOTICE_INTERVAL_MS",
    "CloseResult",
    "DeliveryFuture",
    "IdempotenceState",
    "PartitionSequences",
    "Producer",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordMetadata",
    "RetryNotice",
    "estimate_record_bytes",
    "increment_sequence",
]
