"""The client's view of the cluster, with its connections, in trio.

`ClusterMetadata` bootstraps from a "host:port,host:port" list, refreshes with Metadata v1 and
keeps one `client.network.BrokerConnection` per broker address (pipelined, shared by every task
of its client). A refresh asks one broker at a time, but a broker that has not answered within
`metadata_attempt_timeout_ms` (connecting included) no longer holds it up: the next is asked
too, and the first answer wins. A broker that is hung (stopped, not dead) accepts connections
and reads requests but never answers, so without this it would cost request.timeout.ms.
What the answers mean (leaders, epochs, the KIP-320 merge) is the IO-free
`client.metadata_view.MetadataView` it extends.

Not thread-safe: one instance belongs to one trio run (one producer, consumer or admin).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import trio

from client.clock import now_ms
from client.errors import (
    HighwaterTimeoutError,
    NoBrokersAvailable,
    UnknownTopicError,
    error_for_code,
)
from client.metadata_view import (
    METADATA_ATTEMPT_TIMEOUT_MS,
    METADATA_VERSION,
    AskLeader,
    BrokerInfo,
    MetadataView,
    PartitionInfo,
    RefreshMetadata,
    list_offsets_rounds,
    parse_bootstrap,
)
from client.network import BrokerConnection, BrokerConnectionError, connect
from client.security import ClientSecurity, security_from
from client.settings import METADATA_MAX_AGE_MS, REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MS
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = [
    "METADATA_ATTEMPT_TIMEOUT_MS",
    "BrokerInfo",
    "ClusterMetadata",
    "PartitionInfo",
    "list_offsets",
    "parse_bootstrap",
]


class ClusterMetadata(MetadataView):
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "highwater",
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
        connect_timeout_ms: int = 10_000,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        reconnect_backoff_max_ms: int = 1_000,
        metadata_max_age_ms: int = METADATA_MAX_AGE_MS,
        metadata_attempt_timeout_ms: int = METADATA_ATTEMPT_TIMEOUT_MS,
        security: ClientSecurity | Mapping[str, str] | None = None,
    ) -> None:
        """`connect_timeout_ms`: Kafka's socket.connection.setup.timeout.ms (TCP, TLS and SASL);
        `metadata_attempt_timeout_ms`: METADATA_ATTEMPT_TIMEOUT_MS; `security`: how to secure
        and authenticate connections (None: PLAINTEXT); a mapping holds Kafka's client
        properties (security.protocol, sasl.*, ssl.*)."""
        super().__init__(
            bootstrap, retry_backoff_ms=retry_backoff_ms, metadata_max_age_ms=metadata_max_age_ms
        )
        self.security = security_from(security)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.metadata_attempt_timeout_ms = metadata_attempt_timeout_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connect_locks: dict[tuple[str, int], trio.Lock] = {}
        self._failures: dict[tuple[str, int], tuple[int, float]] = {}  # (count, last at ms)
        # Addresses that let a Metadata request wait past metadata_attempt_timeout_ms: asked
        # last, until one answers.
        self._silent: set[tuple[str, int]] = set()
        self._refresh_lock = trio.Lock()
        self._closed = False

    # ----- refresh -------------------------------------------------------------------------

    async def refresh(
        self, topics: Iterable[str] | None = None, *, all_topics: bool = False
    ) -> MetadataResponse:
        """One Metadata round trip to some broker, merged into this view.

        `topics` None: the topics of interest (`add_topics`); `all_topics`: every topic.
        Tries known brokers, then the bootstrap list, the next as soon as one fails or has
        not answered within metadata_attempt_timeout_ms; NoBrokersAvailable if none answers.
        """
        if all_topics:
            wanted: tuple[str, ...] | None = None
        else:
            wanted = tuple(sorted(self._interest if topics is None else set(topics)))
        request = MetadataRequest(topics=wanted)
        async with self._refresh_lock:
            errors: list[str] = []
            response: MetadataResponse | None = await self._first_answer(
                self._refresh_candidates(), request, METADATA_VERSION, errors
            )
            if response is None:
                self.last_refresh_ms = now_ms()  # back off before the next attempt
                raise NoBrokersAvailable(
                    "no broker answered a metadata request: " + "; ".join(errors[-3:])
                )
            self._merge(response, wanted)
            return response

    async def ask_any(self, request: object, *, prefer: int | None = None) -> Any:
        """The answer to `request`, a read any broker answers (so it may be asked of two), from
        broker `prefer` if it answers in time, else from the others, as a refresh asks them.
        NoBrokersAvailable if none answers."""
        preferred = self.brokers.get(prefer) if prefer is not None else None
        candidates = self._refresh_candidates()
        if preferred is not None and (preferred.host, preferred.port) not in self._silent:
            address = (preferred.host, preferred.port)
            candidates = [address, *(a for a in candidates if a != address)]
        errors: list[str] = []
        answer = await self._first_answer(candidates, request, None, errors)
        if answer is None:
            raise NoBrokersAvailable("no broker answered: " + "; ".join(errors[-3:]))
        return answer

    def mark_silent(self, node_id: int) -> None:
        """Broker `node_id` let a request wait past its time: ask_any and refresh ask it last,
        until it answers one of theirs."""
        broker = self.brokers.get(node_id)
        if broker is not None:
            self._silent.add((broker.host, broker.port))

    async def _first_answer(
        self,
        candidates: Sequence[tuple[str, int]],
        request: object,
        api_version: int | None,
        errors: list[str],
    ) -> Any:
        """The first answer to `request` from `candidates`, asked in order: the next when the
        last one asked failed or has been silent for metadata_attempt_timeout_ms (it stays
        asked, until request.timeout.ms); the rest are cancelled at the first answer. None if
        none answered; why each failed is appended to `errors`."""
        answers: list[Any] = []

        async def ask(address: tuple[str, int], failed: trio.Event, done: trio.CancelScope) -> None:
            try:
                conn = await self._connection_to(address)
                response = await conn.request(
                    request, api_version, timeout_ms=self.request_timeout_ms
                )
            except BrokerConnectionError as exc:
                self._drop(address)
                errors.append(str(exc))
                failed.set()
                return
            self._silent.discard(address)
            answers.append(response)
            done.cancel()

        async with trio.open_nursery() as nursery:
            for address in candidates:
                failed = trio.Event()
                nursery.start_soon(ask, address, failed, nursery.cancel_scope)
                with trio.move_on_after(self.metadata_attempt_timeout_ms / 1000) as attempt:
                    await failed.wait()
                if attempt.cancelled_caught:
                    self._silent.add(address)
        return answers[0] if answers else None

    async def maybe_refresh(self) -> None:
        """Refresh if due; swallow NoBrokersAvailable (the caller retries on its own schedule)."""
        if self.refresh_due(now_ms()):
            with contextlib.suppress(NoBrokersAvailable):
                await self.refresh()

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> tuple[int, ...]:
        """The partitions of `topic`, refreshing (with backoff) until it appears, for at most
        timeout_ms (a refresh still under way then is abandoned).

        UnknownTopicError when the cluster keeps saying the topic does not exist until the
        deadline; HighwaterTimeoutError when no answer came at all, or none to the last refresh;
        TOPIC_AUTHORIZATION_FAILED at once, as Kafka's Metadata.maybeThrowExceptionForTopic
        (waiting would not change the principal's ACLs in time to matter).
        """
        partitions = self.partitions_for(topic)
        if partitions:
            return partitions
        self.add_topics([topic])
        deadline = trio.current_time() + timeout_ms / 1000
        last_error: Exception | None = None
        answered = False
        while True:
            with trio.move_on_at(deadline):
                try:
                    await self.refresh()
                    last_error = None
                    answered = True
                except NoBrokersAvailable as exc:
                    last_error = exc
            partitions = self.partitions_for(topic)
            if partitions:
                return partitions
            if answered and self.topic_error(topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                raise error_for_code(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"topic {topic!r} (no DESCRIBE on it)"
                )
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                break
            await trio.sleep(min(remaining, self.retry_backoff_ms / 1000))
        if last_error is not None or not answered:
            raise HighwaterTimeoutError(
                f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms: "
                f"{last_error or 'no broker answered'}"
            ) from last_error
        code = self.topic_error(topic)
        raise UnknownTopicError(
            f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms"
            + (f" ({ErrorCode(code).name})" if code in ErrorCode._value2member_map_ else "")
        )

    def _refresh_candidates(self) -> list[tuple[str, int]]:
        """Known brokers (connected first, then random order), then the bootstrap list; those
        silent to the last Metadata request asked of them, then a suspect, last."""
        suspect = self.brokers.get(self._suspect) if self._suspect is not None else None
        avoid = (suspect.host, suspect.port) if suspect is not None else None
        known = [(b.host, b.port) for b in self.brokers.values()]
        random.shuffle(known)
        known.sort(key=lambda a: (a == avoid, not self._usable(a)))
        seen: set[tuple[str, int]] = set()
        ordered = []
        for address in [*known, *self.bootstrap]:
            if address not in seen and address != avoid:
                seen.add(address)
                ordered.append(address)
        ordered.sort(key=lambda a: a in self._silent)  # stable: the order above otherwise
        return [*ordered, avoid] if avoid is not None else ordered

    def _merge(self, response: MetadataResponse, wanted: tuple[str, ...] | None) -> None:
        self.merge(response, wanted, now_ms())
        # Drop connections to brokers that left the cluster.
        live = {(b.host, b.port) for b in self.brokers.values()} | set(self.bootstrap)
        for address in [a for a in self._connections if a not in live]:
            self._drop(address)

    # ----- connections -----------------------------------------------------------------------

    async def connection(self, node_id: int) -> BrokerConnection:
        """The pooled connection to broker `node_id` (connecting if needed)."""
        broker = self.brokers.get(node_id)
        if broker is None:
            raise BrokerConnectionError(f"broker {node_id} is not in the metadata")
        return await self._connection_to((broker.host, broker.port))

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker (known ones first, then bootstrap), for admin requests.
        Before any metadata, a refresh first: a hung broker first in the bootstrap list would
        accept the connection and never answer what is sent on it."""
        if not self.brokers:
            with contextlib.suppress(NoBrokersAvailable):
                await self.refresh()
        errors = []
        for address in self._refresh_candidates():
            try:
                return await self._connection_to(address)
            except BrokerConnectionError as exc:
                errors.append(str(exc))
        raise NoBrokersAvailable("no broker reachable: " + "; ".join(errors[-3:]))

    async def request(self, node_id: int, body: object, **kwargs: Any) -> Any:
        """`body` to broker `node_id`; a broken connection is dropped from the pool and raised."""
        conn = await self.connection(node_id)
        try:
            return await conn.request(body, **kwargs)
        except BrokerConnectionError:
            self._drop_connection(conn)
            raise

    def _usable(self, address: tuple[str, int]) -> bool:
        conn = self._connections.get(address)
        return conn is not None and not conn.broken

    def _backoff_ms(self, address: tuple[str, int]) -> float:
        """Kafka's reconnect backoff: exponential from retry_backoff_ms up to the max."""
        failure = self._failures.get(address)
        if failure is None:
            return 0.0
        count, at_ms = failure
        wait = min(self.reconnect_backoff_max_ms, self.retry_backoff_ms * (1 << min(count - 1, 16)))
        return max(0.0, at_ms + wait - now_ms())

    async def _connection_to(self, address: tuple[str, int]) -> BrokerConnection:
        if self._closed:
            raise BrokerConnectionError("metadata client closed")
        conn = self._connections.get(address)
        if conn is not None and not conn.broken:
            return conn
        lock = self._connect_locks.setdefault(address, trio.Lock())
        async with lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.broken:
                return conn
            if conn is not None:
                self._drop(address)
            wait_ms = self._backoff_ms(address)
            if wait_ms > 0:
                await trio.sleep(wait_ms / 1000)
            try:
                conn = await connect(
                    address[0],
                    address[1],
                    client_id=self.client_id,
                    timeout_ms=self.connect_timeout_ms,
                    security=self.security,
                )
            except BrokerConnectionError:
                count = self._failures.get(address, (0, 0.0))[0]
                self._failures[address] = (count + 1, now_ms())
                raise
            self._failures.pop(address, None)
            self._connections[address] = conn
            return conn

    def _drop_connection(self, conn: BrokerConnection) -> None:
        for address, pooled in list(self._connections.items()):
            if pooled is conn:
                self._drop(address)

    def _drop(self, address: tuple[str, int]) -> None:
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close_now()

    async def aclose(self) -> None:
        self._closed = True
        for address in list(self._connections):
            self._drop(address)
        await trio.lowlevel.checkpoint()


async def list_offsets(
    metadata: ClusterMetadata,
    timestamps: dict[tuple[str, int], int],
    *,
    replica_id: int = -1,
    timeout_ms: float = 60_000,
    partial: bool = False,
) -> dict[tuple[str, int], tuple[int, int]]:
    """ListOffsets for each (topic, partition) -> (offset, timestamp), asking each leader.

    `timestamps` values: -1 latest (the HW for replica_id -1; the LEO for the debug id -2),
    -2 earliest, else the first offset whose timestamp is at or after it (offset -1: none).
    Retriable errors and missing leaders refresh the metadata and retry until timeout_ms
    (HighwaterTimeoutError). `partial`: one round only, returning what succeeded.
    """
    rounds = list_offsets_rounds(
        metadata,
        timestamps,
        now_ms(),
        timeout_ms=timeout_ms,
        replica_id=replica_id,
        partial=partial,
    )
    try:
        step = next(rounds)
        while True:
            answer: object = None
            if isinstance(step, AskLeader):
                try:
                    answer = await metadata.request(
                        step.leader, step.request, timeout_ms=metadata.request_timeout_ms
                    )
                except BrokerConnectionError as exc:
                    answer = exc
            elif isinstance(step, RefreshMetadata):
                with contextlib.suppress(NoBrokersAvailable):
                    await metadata.refresh()
            else:
                await trio.sleep(step.delay_ms / 1000)
            step = rounds.send((answer, now_ms()))
    except StopIteration as done:
        results: dict[tuple[str, int], tuple[int, int]] = done.value
        return results
