"""Kafka's wire protocol on a listener: the wire choice and per-API translation (docs/kafka.md)."""
