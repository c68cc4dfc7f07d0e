"""What the Spark driver asks the cluster: a subscription's partitions and their offsets.

Each question opens blocking connections (client.sync_network), asks, and closes them, so
nothing (no thread, no socket) outlives the call inside Spark's long-lived Python worker, and
trio is not imported on the driver: Spark's streaming source runner imports the source in a
fresh process before each query and waits for it. The answers are read by the same IO-free
`MetadataView` and ListOffsets rounds as the trio clients use.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from client.errors import (
    BrokerConnectionError,
    HighwaterClientError,
    NoBrokersAvailable,
)
from client.metadata_view import (
    METADATA_ATTEMPT_TIMEOUT_MS,
    METADATA_VERSION,
    AskLeader,
    MetadataView,
    RefreshMetadata,
    list_offsets_rounds,
)
from client.security import ClientSecurity, security_from
from client.settings import REQUEST_TIMEOUT_MS
from client.spark.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition
from client.spark.options import SourceOptions
from client.sync_network import SyncBrokerConnection, connect_sync
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = ["OffsetSnapshot", "commit_for_lag", "offsets_for_timestamp", "snapshot"]

CONNECT_TIMEOUT_MS = 10_000  # Kafka's socket.connection.setup.timeout.ms
LAG_COMMIT_TIMEOUT_MS = 10_000  # a lag report never holds a micro-batch up for long


@dataclass(frozen=True)
class OffsetSnapshot:
    """The subscription's partitions now, with their high watermarks (the end of committed
    records) and, when asked for, their log start offsets."""

    latest: PartitionOffsets
    earliest: PartitionOffsets = field(default_factory=dict)


def snapshot(
    options: SourceOptions,
    *,
    earliest_for: Iterable[TopicPartition] | None = (),
) -> OffsetSnapshot:
    """The HW of every partition of the subscription, and the log start offset of
    `earliest_for` (None: of every partition)."""
    wanted = None if earliest_for is None else set(earliest_for)
    with _DriverCluster(options) as cluster:
        partitions = cluster.partitions(options)
        latest = cluster.offsets(partitions, LATEST)
        chosen = partitions if wanted is None else [p for p in partitions if p in wanted]
        earliest = cluster.offsets(chosen, EARLIEST) if chosen else {}
        return OffsetSnapshot(latest, earliest)


def offsets_for_timestamp(
    options: SourceOptions, timestamp_ms: int
) -> tuple[PartitionOffsets, PartitionOffsets]:
    """Per partition, the first offset whose record timestamp is at or after `timestamp_ms`
    (-1 when there is none), and the partitions' HWs."""
    with _DriverCluster(options) as cluster:
        partitions = cluster.partitions(options)
        latest = cluster.offsets(partitions, LATEST)
        return cluster.offsets(partitions, timestamp_ms), latest


class _DriverCluster:
    """A MetadataView with blocking connections, for one question."""

    def __init__(self, options: SourceOptions) -> None:
        self.view = MetadataView(options.bootstrap_servers)
        self.security: ClientSecurity | None = security_from(dict(options.security))
        self._connections: dict[tuple[str, int], SyncBrokerConnection] = {}

    def __enter__(self) -> _DriverCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def partitions(self, options: SourceOptions) -> list[TopicPartition]:
        """The partitions the subscription covers now (a subscribed topic that does not exist
        yet has none; a pattern takes every matching topic, so new ones join)."""
        if options.assign is not None:
            return list(options.assign)
        self.refresh(options.subscribe)
        found: list[TopicPartition] = []
        for topic in self.view.topics:
            if options.matches(topic):
                partitions = self.view.partitions_for(topic) or ()
                found.extend(TopicPartition(topic, p) for p in partitions)
        return sorted(found)

    def refresh(self, topics: Iterable[str] | None) -> None:
        """One Metadata answer from some broker (known ones first, then the bootstrap list);
        `topics` None: every topic. NoBrokersAvailable if none answers.

        Each is given METADATA_ATTEMPT_TIMEOUT_MS (connecting included) first, so a hung broker
        (stopped, not dead: it accepts the connection and never answers) costs that; only if
        none answers in it are they asked again with the full timeouts (a slow cluster)."""
        wanted = None if topics is None else tuple(sorted(topics))
        request = MetadataRequest(topics=wanted)
        known = [(b.host, b.port) for b in self.view.brokers.values()]
        errors: list[str] = []
        candidates = list(dict.fromkeys([*known, *self.view.bootstrap]))
        for connect_ms, request_ms in (
            (METADATA_ATTEMPT_TIMEOUT_MS, METADATA_ATTEMPT_TIMEOUT_MS),
            (CONNECT_TIMEOUT_MS, REQUEST_TIMEOUT_MS),
        ):
            for address in candidates:
                try:
                    response: MetadataResponse = self._connection(address, connect_ms).request(
                        request, METADATA_VERSION, timeout_ms=request_ms
                    )
                except BrokerConnectionError as exc:
                    self._drop(address)
                    errors.append(str(exc))
                    continue
                self.view.merge(response, wanted, time.monotonic() * 1000)
                return
        raise NoBrokersAvailable("no broker answered a metadata request: " + "; ".join(errors[-3:]))

    def offsets(self, partitions: Iterable[TopicPartition], timestamp: int) -> PartitionOffsets:
        """ListOffsets of `partitions` from their leaders: the rounds of
        client.metadata.list_offsets over blocking connections, until the request timeout
        (HighwaterTimeoutError)."""
        view = self.view
        rounds = list_offsets_rounds(
            view,
            {(tp.topic, tp.partition): timestamp for tp in partitions},
            time.monotonic() * 1000,
            timeout_ms=REQUEST_TIMEOUT_MS,
        )
        try:
            step = next(rounds)
            while True:
                answer: object = None
                if isinstance(step, AskLeader):
                    broker = view.brokers[step.leader]
                    address = (broker.host, broker.port)
                    try:
                        answer = self._connection(address).request(
                            step.request, timeout_ms=REQUEST_TIMEOUT_MS
                        )
                    except BrokerConnectionError as exc:
                        self._drop(address)
                        answer = exc
                elif isinstance(step, RefreshMetadata):
                    with contextlib.suppress(NoBrokersAvailable):
                        self.refresh(step.topics)
                else:
                    time.sleep(step.delay_ms / 1000)  # retry backoff
                step = rounds.send((answer, time.monotonic() * 1000))
        except StopIteration as done:
            results: dict[tuple[str, int], tuple[int, int]] = done.value
        return {TopicPartition(*tp): offset for tp, (offset, _) in results.items()}

    def _connection(
        self, address: tuple[str, int], connect_ms: int = CONNECT_TIMEOUT_MS
    ) -> SyncBrokerConnection:
        connection = self._connections.get(address)
        if connection is None or connection.broken:
            connection = connect_sync(
                *address,
                client_id="highwater-spark",
                timeout_ms=connect_ms,
                security=self.security,
            )
            self._connections[address] = connection
        return connection

    def _drop(self, address: tuple[str, int]) -> None:
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()


def commit_for_lag(options: SourceOptions, offsets: PartitionOffsets) -> str | None:
    """Commit `offsets` to the option groupIdForLag's group from outside the group (as
    `groups reset-offsets` does): only for `groups describe`'s lag. None, or why it failed."""
    import trio  # only for queries with groupIdForLag (import time)

    assert options.group_id_for_lag is not None
    return trio.run(_commit_for_lag, options, options.group_id_for_lag, offsets)


async def _commit_for_lag(
    options: SourceOptions, group_id: str, offsets: PartitionOffsets
) -> str | None:
    import trio

    from client.admin import Admin

    try:
        with trio.fail_after(LAG_COMMIT_TIMEOUT_MS / 1000):
            async with Admin(
                options.bootstrap_servers,
                client_id="highwater-spark",
                security=dict(options.security),
                request_timeout_ms=LAG_COMMIT_TIMEOUT_MS,
            ) as admin:
                await admin.alter_group_offsets(
                    group_id, {(tp.topic, tp.partition): o for tp, o in offsets.items()}
                )
    except (HighwaterClientError, trio.TooSlowError, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None
