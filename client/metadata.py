"""The client's view of the cluster: brokers, controller, partition leaders, and connections.

`ClusterMetadata` bootstraps from a "host:port,host:port" list, refreshes with Metadata v1 and
keeps one `client.network.BrokerConnection` per broker address (pipelined, shared by every task
of its client). The refresh merge is Kafka's (Metadata.updateLatestMetadata, KIP-320): a
partition whose new leader epoch is older than the one already known keeps the known state, so
a broker with stale metadata cannot move a leader backwards. `controller_epoch` only grows.

Not thread-safe: one instance belongs to one trio run (one producer, consumer or admin).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from client.errors import (
    HighwaterTimeoutError,
    NoBrokersAvailable,
    UnknownTopicError,
    error_for_code,
)
from client.network import BrokerConnection, BrokerConnectionError, connect
from client.security import ClientSecurity, security_from
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = [
    "BrokerInfo",
    "ClusterMetadata",
    "PartitionInfo",
    "list_offsets",
    "parse_bootstrap",
]

METADATA_VERSION = 1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: no leader now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[tuple[str, int]]:
    """ "h1:9092,h2:9093" (or a list of "h:p") -> [(host, port)]; a missing port means 9092."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    addresses = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "9092"
        host = host.strip("[]")  # [::1]:9092
        try:
            port_number = int(port)
        except ValueError:
            raise ValueError(f"bad bootstrap address {item!r}: port must be a number") from None
        if not host or not 0 < port_number < 65536:
            raise ValueError(f"bad bootstrap address {item!r}")
        addresses.append((host, port_number))
    if not addresses:
        raise ValueError("bootstrap servers: at least one host:port is needed")
    return addresses


class ClusterMetadata:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "highwater",
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_max_ms: int = 1_000,
        metadata_max_age_ms: int = 300_000,
        security: ClientSecurity | Mapping[str, str] | None = None,
    ) -> None:
        """`security`: how to secure and authenticate connections (None: PLAINTEXT); a
        mapping holds Kafka's client properties (security.protocol, sasl.*, ssl.*)."""
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security_from(security)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.metadata_max_age_ms = metadata_max_age_ms

        self.brokers: dict[int, BrokerInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.controller_epoch = -1
        self._partitions: dict[str, dict[int, PartitionInfo]] = {}
        self._topic_errors: dict[str, int] = {}
        self._interest: set[str] = set()  # topics refreshed when no list is given
        self._all_topics = False  # refresh every topic (admin)
        self.last_refresh_ms = -math.inf  # the last refresh, answered or not
        self.last_answer_ms = -math.inf  # the last refresh a broker answered
        self.update_requested = True
        # A broker that just timed out as a leader: it may be cut off from the cluster and
        # still name itself leader, so the next refresh asks it last.
        self._suspect: int | None = None

        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connect_locks: dict[tuple[str, int], trio.Lock] = {}
        self._failures: dict[tuple[str, int], tuple[int, float]] = {}  # (count, last at ms)
        self._refresh_lock = trio.Lock()
        self._refreshed = trio.Event()
        self._closed = False

    # ----- queries (no IO) -----------------------------------------------------------------

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted(self._partitions))

    def partitions_for(self, topic: str) -> tuple[int, ...] | None:
        """Partition numbers of `topic`, or None while it is unknown."""
        parts = self._partitions.get(topic)
        return None if parts is None else tuple(sorted(parts))

    def partition_count(self, topic: str) -> int:
        """How many partitions `topic` has (0 while unknown); cheap, for the send path."""
        return len(self._partitions.get(topic, ()))

    @property
    def partitions_by_topic(self) -> Mapping[str, Mapping[int, PartitionInfo]]:
        """The live map topic -> partition -> info (updated in place by each refresh; the
        same object for the client's lifetime): for hot paths that read it once and keep it."""
        return self._partitions

    def partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        return self._partitions.get(topic, {}).get(partition)

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        """Partitions of `topic` that have a live leader now."""
        parts = self._partitions.get(topic, {})
        return tuple(
            sorted(
                p for p, info in parts.items() if info.leader >= 0 and info.leader in self.brokers
            )
        )

    def leader_for(self, topic: str, partition: int) -> int | None:
        """Broker id of the partition's leader, or None (unknown partition, or no leader now)."""
        info = self.partition_info(topic, partition)
        if info is None or info.leader < 0 or info.leader not in self.brokers:
            return None
        return info.leader

    def topic_error(self, topic: str) -> int:
        return self._topic_errors.get(topic, 0)

    def add_topics(self, topics: Iterable[str]) -> None:
        """Topics to keep in the metadata from now on; a refresh is requested for new ones."""
        new = set(topics) - self._interest
        if new:
            self._interest |= new
            self.update_requested = True

    def set_topics(self, topics: Iterable[str]) -> None:
        self._interest = set(topics)
        self.update_requested = True

    def request_update(self, suspect: int | None = None) -> None:
        """Refresh soon. `suspect`: a broker whose request just timed out; until a refresh is
        answered, it is asked last (it may lead in an old epoch without knowing, e.g. cut
        off from ZooKeeper but not from its clients)."""
        self.update_requested = True
        if suspect is not None:
            self._suspect = suspect

    def refresh_due(self, now_ms: float) -> bool:
        """A refresh was asked for (and the backoff passed) or the metadata got old."""
        age = now_ms - self.last_refresh_ms
        if self.update_requested:
            return age >= self.retry_backoff_ms
        return age >= self.metadata_max_age_ms

    # ----- refresh -------------------------------------------------------------------------

    async def refresh(
        self, topics: Iterable[str] | None = None, *, all_topics: bool = False
    ) -> MetadataResponse:
        """One Metadata round trip to some broker, merged into this view.

        `topics` None: the topics of interest (`add_topics`); `all_topics`: every topic.
        Tries known brokers, then the bootstrap list; NoBrokersAvailable if none answers.
        """
        if all_topics:
            wanted: tuple[str, ...] | None = None
        else:
            wanted = tuple(sorted(self._interest if topics is None else set(topics)))
        request = MetadataRequest(topics=wanted)
        async with self._refresh_lock:
            errors: list[str] = []
            for address in self._refresh_candidates():
                try:
                    conn = await self._connection_to(address)
                    response: MetadataResponse = await conn.request(
                        request, METADATA_VERSION, timeout_ms=self.request_timeout_ms
                    )
                except BrokerConnectionError as exc:
                    self._drop(address)
                    errors.append(str(exc))
                    continue
                self._merge(response, wanted)
                return response
            self.last_refresh_ms = _now_ms()  # back off before the next attempt
            raise NoBrokersAvailable(
                "no broker answered a metadata request: " + "; ".join(errors[-3:])
            )

    async def maybe_refresh(self) -> None:
        """Refresh if due; swallow NoBrokersAvailable (the caller retries on its own schedule)."""
        if self.refresh_due(_now_ms()):
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
        """Known brokers (connected first, then random order; a suspect last), then the
        bootstrap list."""
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
        return [*ordered, avoid] if avoid is not None else ordered

    def _merge(self, response: MetadataResponse, wanted: tuple[str, ...] | None) -> None:
        # A broker that has not heard from the controller we know of yet (one just restarted
        # answers with controller epoch -1, no topics and few brokers): what it lacks is not
        # news, and forgetting a topic would forget its leader epochs, so that a deposed
        # leader's stale answer would be believed next (KIP-320 keeps last-seen epochs apart).
        behind = (
            response.cluster_id == self.cluster_id
            and response.controller_epoch < self.controller_epoch
        )
        if not behind:
            self.brokers = {
                b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
            }
            self.controller_epoch = response.controller_epoch
            self.controller_id = response.controller_id
        self.cluster_id = response.cluster_id
        seen_topics = set()
        for topic in response.topics:
            seen_topics.add(topic.name)
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                if not behind:
                    self._topic_errors[topic.name] = topic.error_code
                    self._partitions.pop(topic.name, None)
                continue
            self._topic_errors[topic.name] = topic.error_code
            if topic.error_code != 0 and not topic.partitions:
                continue  # e.g. LEADER_NOT_AVAILABLE while being created: keep what we had
            old = self._partitions.get(topic.name, {})
            merged: dict[int, PartitionInfo] = {}
            for p in topic.partitions:
                info = PartitionInfo(
                    topic.name,
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    tuple(p.offline_replicas),
                    p.error_code,
                )
                known = old.get(p.partition_index)
                if known is not None and 0 <= info.leader_epoch < known.leader_epoch:
                    info = known  # stale answer (KIP-320)
                merged[p.partition_index] = info
            self._partitions[topic.name] = merged
        if wanted is None and not behind:
            for gone in set(self._partitions) - seen_topics:
                del self._partitions[gone]
        self.last_refresh_ms = self.last_answer_ms = _now_ms()
        self.update_requested = False
        self._suspect = None
        self._refreshed.set()
        self._refreshed = trio.Event()
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
        """A connection to some broker (known ones first, then bootstrap), for admin requests."""
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
        return max(0.0, at_ms + wait - _now_ms())

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
                self._failures[address] = (count + 1, _now_ms())
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


def _now_ms() -> float:
    return float(trio.current_time() * 1000)


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
    deadline = trio.current_time() + timeout_ms / 1000
    pending = dict(timestamps)
    results: dict[tuple[str, int], tuple[int, int]] = {}
    last_problem = ""
    while pending:
        if metadata.update_requested or any(metadata.leader_for(*tp) is None for tp in pending):
            metadata.add_topics(t for t, _ in pending)
            with contextlib.suppress(NoBrokersAvailable):
                await metadata.refresh()
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in pending:
            leader = metadata.leader_for(*tp)
            if leader is None:
                last_problem = f"no leader for {tp[0]}-{tp[1]}"
                if (
                    metadata.partition_info(*tp) is None
                    and metadata.topic_error(tp[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                ):
                    raise UnknownTopicError(f"UNKNOWN_TOPIC_OR_PARTITION: {tp[0]}-{tp[1]}")
                continue
            by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            topics: dict[str, list[ListOffsetsPartition]] = {}
            for topic, partition in tps:
                info = metadata.partition_info(topic, partition)
                topics.setdefault(topic, []).append(
                    ListOffsetsPartition(
                        partition,
                        pending[(topic, partition)],
                        info.leader_epoch if info is not None else -1,
                    )
                )
            request = ListOffsetsRequest(
                replica_id=replica_id,
                topics=tuple(ListOffsetsTopic(t, tuple(ps)) for t, ps in topics.items()),
            )
            try:
                response: ListOffsetsResponse = await metadata.request(
                    leader, request, timeout_ms=metadata.request_timeout_ms
                )
            except BrokerConnectionError as exc:
                metadata.request_update()
                last_problem = str(exc)
                continue
            for topic_response in response.topics:
                for p in topic_response.partitions:
                    tp = (topic_response.name, p.partition_index)
                    if tp not in pending:
                        continue
                    if p.error_code == 0:
                        results[tp] = (p.offset, p.timestamp)
                        del pending[tp]
                        continue
                    error = error_for_code(p.error_code, f"list offsets of {tp[0]}-{tp[1]}")
                    if not error.retriable:
                        if partial:
                            del pending[tp]
                            continue
                        raise error
                    metadata.request_update()
                    last_problem = str(error)
        if not pending or partial:
            break
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            raise HighwaterTimeoutError(
                f"list offsets not done in {timeout_ms:.0f} ms: {last_problem}"
            )
        await trio.sleep(min(remaining, metadata.retry_backoff_ms / 1000))
    return results
