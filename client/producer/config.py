"""The producer's settings as one frozen object (Kafka's ProducerConfig), defaults from the
clients' settings table (client/settings.py); `build` checks and normalises what Producer's
keyword arguments give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from client.producer.idempotence import idempotence_enabled
from client.settings import default_float, default_int, default_str
from protocol.compression import Compression, codec_named

__all__ = ["PRODUCER_DEFAULTS", "ProducerConfig"]

_P: Final = "producer"
_COMPRESSION: Final = codec_named(default_str(_P, "compression.type"))


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Each field is the Kafka setting of the same name with "_" for "." (compression:
    compression.type); acks is -1 for "all", enable_idempotence as resolved (Kafka 3.x)."""

    acks: int = default_int(_P, "acks")
    enable_idempotence: bool = True
    linger_ms: float = default_float(_P, "linger.ms")
    batch_size: int = default_int(_P, "batch.size")
    compression: Compression = _COMPRESSION
    retries: int = default_int(_P, "retries")
    retry_backoff_ms: float = default_float(_P, "retry.backoff.ms")
    delivery_timeout_ms: float = default_float(_P, "delivery.timeout.ms")
    request_timeout_ms: int = default_int(_P, "request.timeout.ms")
    max_block_ms: float = default_float(_P, "max.block.ms")
    buffer_memory: int = default_int(_P, "buffer.memory")
    max_request_size: int = default_int(_P, "max.request.size")
    max_in_flight_requests_per_connection: int = default_int(
        _P, "max.in.flight.requests.per.connection"
    )
    metadata_max_age_ms: int = default_int(_P, "metadata.max.age.ms")
    client_id: str = default_str(_P, "client.id")

    @classmethod
    def build(
        cls,
        *,
        acks: int | str,
        enable_idempotence: bool | None,
        compression: str | Compression,
        linger_ms: float,
        batch_size: int,
        retries: int,
        retry_backoff_ms: float,
        delivery_timeout_ms: float,
        request_timeout_ms: int,
        max_block_ms: float,
        buffer_memory: int,
        max_request_size: int,
        max_in_flight_requests_per_connection: int,
        metadata_max_age_ms: int,
        client_id: str,
    ) -> ProducerConfig:
        """ValueError for a bad acks, compression or non-positive size; `enable_idempotence`
        None is on unless acks, retries or max in flight conflict (idempotence_enabled)."""
        if acks == "all":
            acks = -1
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if not isinstance(compression, Compression):
            compression = codec_named(compression)  # Kafka's compression.type names
        max_in_flight = max_in_flight_requests_per_connection
        if batch_size <= 0 or max_in_flight <= 0 or buffer_memory <= 0:
            raise ValueError("batch_size, buffer_memory and max in flight must be positive")
        return cls(
            acks=int(acks),
            enable_idempotence=idempotence_enabled(
                enable_idempotence, int(acks), retries, max_in_flight
            ),
            linger_ms=linger_ms,
            batch_size=batch_size,
            compression=compression,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            max_block_ms=max_block_ms,
            buffer_memory=buffer_memory,
            max_request_size=max_request_size,
            max_in_flight_requests_per_connection=max_in_flight,
            metadata_max_age_ms=metadata_max_age_ms,
            client_id=client_id,
        )


PRODUCER_DEFAULTS: Final = ProducerConfig()
