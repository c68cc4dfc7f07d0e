"""Kafka's own wire protocol, for listeners that speak it (docs/kafka.md): frames, message
bodies (kio's classes, generated from Kafka's JSON specs) and the records section of v2
batches. Pure: bytes in, typed values out."""
