"""InitProducerId for the idempotent producer (Kafka's Sender.maybeWaitForProducerId): ask any
broker, retrying what Kafka retries, for at most max_block_ms."""

from __future__ import annotations

from typing import Final

import trio

from client.errors import (
    HighwaterClientError,
    HighwaterTimeoutError,
    NoBrokersAvailable,
    ProducerFatalError,
    error_for_code,
)
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.producer.idempotence import IdempotenceState
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

__all__ = ["NETWORK_TIMEOUT_MARGIN_MS", "init_producer_id"]

NETWORK_TIMEOUT_MARGIN_MS: Final = 1_000  # the broker answers its own timeout first
_TRANSACTION_TIMEOUT_MS: Final = 60_000  # Kafka's transaction.timeout.ms (no transactions here)
# The coordinator errors Kafka retries for InitProducerId, whether or not protocol.errors names
# them: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
_COORDINATOR_RETRIABLE_CODES: Final = frozenset({14, 15, 16})


async def init_producer_id(
    metadata: ClusterMetadata,
    idempotence: IdempotenceState,
    *,
    max_block_ms: float,
    retry_backoff_ms: float,
    request_timeout_ms: int,
) -> HighwaterClientError | None:
    """Set `idempotence`'s producer id and epoch (None), or the reason there is none: a
    ProducerFatalError for an error Kafka does not retry, a HighwaterTimeoutError when retriable
    errors (every retry_backoff_ms) lasted max_block_ms."""
    deadline = trio.current_time() + max_block_ms / 1000
    last_error = "no answer"
    while trio.current_time() < deadline:
        with trio.move_on_at(deadline):
            try:
                response = await _request(metadata, request_timeout_ms)
            except (BrokerConnectionError, NoBrokersAvailable) as exc:
                last_error = str(exc)
            else:
                code = response.error_code
                if code == ErrorCode.NONE:
                    idempotence.producer_id = response.producer_id
                    idempotence.producer_epoch = response.producer_epoch
                    return None
                error = error_for_code(code, "InitProducerId")
                if not (error.retriable or code in _COORDINATOR_RETRIABLE_CODES):
                    return ProducerFatalError(str(error), error.code)
                last_error = str(error)
            await trio.sleep(retry_backoff_ms / 1000)
    return HighwaterTimeoutError(
        f"no producer id (InitProducerId) within max_block_ms {max_block_ms:.0f}: {last_error}"
    )


async def _request(metadata: ClusterMetadata, request_timeout_ms: int) -> InitProducerIdResponse:
    conn = await metadata.any_connection()
    response: InitProducerIdResponse = await conn.request(
        InitProducerIdRequest(transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS),
        timeout_ms=request_timeout_ms + NETWORK_TIMEOUT_MARGIN_MS,
    )
    return response
