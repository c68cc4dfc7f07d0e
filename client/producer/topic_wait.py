"""The producer's wait for a topic's metadata (Kafka's KafkaProducer.waitOnMetadata), and its
fast failure while no broker answers at all."""

from __future__ import annotations

import trio

from client.clock import now_ms
from client.errors import HighwaterTimeoutError, NoBrokersAvailable
from client.metadata import ClusterMetadata

__all__ = ["TopicWait"]


class TopicWait:
    """`await partitions(topic, nursery)`: the topic's partitions, waiting at most
    max_block_ms for the cluster to show it."""

    def __init__(
        self, metadata: ClusterMetadata, *, max_block_ms: float, retry_backoff_ms: float
    ) -> None:
        self._metadata = metadata
        self._max_block_ms = max_block_ms
        self._retry_backoff_ms = retry_backoff_ms
        # Set when no broker answered a wait of max_block_ms; cleared by the first answer
        # (_probe_brokers asks meanwhile). While set, a wait fails at once: records never
        # wait behind a cluster that is not there.
        self._no_brokers: NoBrokersAvailable | None = None

    async def partitions(self, topic: str, nursery: trio.Nursery | None) -> tuple[int, ...]:
        """UnknownTopicError or HighwaterTimeoutError if the cluster did not show the topic in
        max_block_ms; NoBrokersAvailable if no broker answered at all, and from then on at
        once, without waiting, until one answers (asked in the background in `nursery`;
        None: the producer is closing, nobody asks)."""
        partitions = self._metadata.partitions_for(topic)
        if partitions:
            return partitions
        if self._no_brokers is not None:
            raise NoBrokersAvailable(str(self._no_brokers))
        started_ms = now_ms()
        try:
            return await self._metadata.wait_for_topic(topic, self._max_block_ms)
        except HighwaterTimeoutError as exc:
            if self._metadata.last_answer_ms >= started_ms:
                raise  # the cluster is there
            cause = exc.__cause__ or "no broker answered a metadata request"
            error = NoBrokersAvailable(
                f"{cause} (none in max_block_ms, {self._max_block_ms:.0f} ms)"
            )
            if nursery is not None:
                self._no_brokers = error
                nursery.start_soon(self._probe_brokers)
            raise error from None

    async def _probe_brokers(self) -> None:
        """While no broker answers: a metadata round every retry_backoff_ms (connections back
        off further, up to reconnect_backoff_max_ms), until one answers."""
        while self._no_brokers is not None:
            try:
                await self._metadata.refresh()
            except NoBrokersAvailable:
                await trio.sleep(self._retry_backoff_ms / 1000)
            else:
                self._no_brokers = None
