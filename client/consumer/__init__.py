"""The consumer (Kafka's KafkaConsumer): `Consumer`, and what its callers name.

Kafka's seams, one module each: consumer.py (the facade), fetcher.py (Fetch and the record
buffers), positions.py (resets, KIP-320 validation), partition_state.py (one partition's
position and buffer). docs/architecture.md ("client/") gives the design.
"""

from client.consumer.consumer import Consumer
from client.consumer.fetcher import LEADER_ERRORS
from client.consumer.partition_state import ConsumerRecord
from client.consumer.positions import truncation_offset
from protocol.topic_partition import TopicPartition

__all__ = ["LEADER_ERRORS", "Consumer", "ConsumerRecord", "TopicPartition", "truncation_offset"]
