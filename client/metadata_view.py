"""The client's view of the cluster, IO-free: brokers, partition leaders and leader epochs.

`MetadataView` holds what the last Metadata answers said and merges each new one as Kafka's
Metadata.updateLatestMetadata does (KIP-320): a partition whose new leader epoch is older than
the one already known keeps the known state, so a broker with stale metadata cannot move a
leader backwards. `controller_epoch` only grows. The trio client (`client.metadata`) and the
Spark driver's blocking questions (`client.spark.cluster`) both drive it, and both drive the
ListOffsets rounds below (`list_offsets_rounds`): what to ask each leader, when to refresh,
back off or give up, as a sans-IO generator of steps.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass

from client.errors import (
    BrokerConnectionError,
    HighwaterTimeoutError,
    UnknownTopicError,
    error_for_code,
)
from client.settings import METADATA_MAX_AGE_MS, RETRY_BACKOFF_MS
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataResponse

__all__ = [
    "METADATA_ATTEMPT_TIMEOUT_MS",
    "METADATA_VERSION",
    "AskLeader",
    "Backoff",
    "BrokerInfo",
    "ListOffsetsRounds",
    "MetadataView",
    "PartitionInfo",
    "RefreshMetadata",
    "list_offsets_requests",
    "list_offsets_rounds",
    "parse_bootstrap",
    "take_list_offsets",
]

METADATA_VERSION = 1
# How long a Metadata request waits for one broker, connecting included, before the next
# candidate is asked as well (Highwater's; Kafka's clients wait request.timeout.ms for a broker
# that accepts a connection but never answers). The trio clients keep the first asked, so a
# slow cluster still answers; the Spark driver's blocking refresh asks each for this long, then
# each again for request.timeout.ms. A hung broker costs this much, not request.timeout.ms.
METADATA_ATTEMPT_TIMEOUT_MS = 1_000

TopicPartitionKey = tuple[str, int]


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


class MetadataView:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        metadata_max_age_ms: int = METADATA_MAX_AGE_MS,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.brokers: dict[int, BrokerInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.controller_epoch = -1
        self._partitions: dict[str, dict[int, PartitionInfo]] = {}
        self._topic_errors: dict[str, int] = {}
        self._interest: set[str] = set()  # topics refreshed when no list is given
        self.last_refresh_ms = -math.inf  # the last refresh, answered or not
        self.last_answer_ms = -math.inf  # the last refresh a broker answered
        self.update_requested = True
        # A broker that just timed out as a leader: it may be cut off from the cluster and
        # still name itself leader, so the next refresh asks it last.
        self._suspect: int | None = None

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

    def merge(
        self, response: MetadataResponse, wanted: tuple[str, ...] | None, now_ms: float
    ) -> None:
        """Take a Metadata answer in; `wanted` None: it listed every topic."""
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
        self.last_refresh_ms = self.last_answer_ms = now_ms
        self.update_requested = False
        self._suspect = None


def list_offsets_requests(
    view: MetadataView, pending: Mapping[TopicPartitionKey, int], replica_id: int = -1
) -> tuple[dict[int, ListOffsetsRequest], str]:
    """One ListOffsets round: the request for each leader of the `pending` partitions (value:
    the timestamp asked for), and why some partition cannot be asked now ("": none can't).

    A partition of a topic the cluster says does not exist: UnknownTopicError.
    """
    problem = ""
    by_leader: dict[int, dict[str, list[ListOffsetsPartition]]] = {}
    for tp, timestamp in pending.items():
        leader = view.leader_for(*tp)
        if leader is None:
            problem = f"no leader for {tp[0]}-{tp[1]}"
            if (
                view.partition_info(*tp) is None
                and view.topic_error(tp[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ):
                raise UnknownTopicError(f"UNKNOWN_TOPIC_OR_PARTITION: {tp[0]}-{tp[1]}")
            continue
        info = view.partition_info(*tp)
        by_leader.setdefault(leader, {}).setdefault(tp[0], []).append(
            ListOffsetsPartition(tp[1], timestamp, info.leader_epoch if info is not None else -1)
        )
    requests = {
        leader: ListOffsetsRequest(
            replica_id=replica_id,
            topics=tuple(ListOffsetsTopic(t, tuple(ps)) for t, ps in topics.items()),
        )
        for leader, topics in by_leader.items()
    }
    return requests, problem


def take_list_offsets(
    view: MetadataView,
    response: ListOffsetsResponse,
    pending: dict[TopicPartitionKey, int],
    results: dict[TopicPartitionKey, tuple[int, int]],
    *,
    partial: bool = False,
) -> str:
    """Move each answered partition from `pending` to `results` as (offset, timestamp).

    A retriable error leaves the partition pending and asks for a metadata update (its leader
    may have moved); the last such error is returned ("": none). Any other error is raised,
    or with `partial` the partition is dropped from `pending`.
    """
    problem = ""
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
            view.request_update()
            problem = str(error)
    return problem


@dataclass(frozen=True, slots=True)
class RefreshMetadata:
    """Update the view from some broker; NoBrokersAvailable is not an error here (the round
    goes on with what is known). `topics`: those the rounds need."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AskLeader:
    """Send `request` to broker `leader`; the answer is its ListOffsetsResponse, or the
    BrokerConnectionError that sending it raised."""

    leader: int
    request: ListOffsetsRequest


@dataclass(frozen=True, slots=True)
class Backoff:
    """Wait this long before the next round."""

    delay_ms: float


# A shell answers each step with (the AskLeader's answer or None, its clock now in ms).
ListOffsetsRounds = Generator[
    RefreshMetadata | AskLeader | Backoff,
    tuple[object, float],
    dict[TopicPartitionKey, tuple[int, int]],
]


def list_offsets_rounds(
    view: MetadataView,
    timestamps: Mapping[TopicPartitionKey, int],
    now_ms: float,
    *,
    timeout_ms: float,
    replica_id: int = -1,
    partial: bool = False,
) -> ListOffsetsRounds:
    """ListOffsets of each partition from its leader, in rounds; returns (topic, partition)
    -> (offset, timestamp). Missing leaders and retriable errors refresh the metadata and try
    again after `retry_backoff_ms`, until `timeout_ms` (HighwaterTimeoutError); `partial`:
    one round only, with what succeeded."""
    deadline_ms = now_ms + timeout_ms
    pending = dict(timestamps)
    results: dict[TopicPartitionKey, tuple[int, int]] = {}
    while pending:
        if view.update_requested or any(view.leader_for(*tp) is None for tp in pending):
            view.add_topics(t for t, _ in pending)
            _, now_ms = yield RefreshMetadata(tuple(sorted({t for t, _ in pending})))
        requests, problem = list_offsets_requests(view, pending, replica_id)
        for leader, request in requests.items():
            answer, now_ms = yield AskLeader(leader, request)
            if isinstance(answer, BrokerConnectionError):
                view.request_update()
                problem = str(answer)
                continue
            assert isinstance(answer, ListOffsetsResponse)
            problem = take_list_offsets(view, answer, pending, results, partial=partial) or problem
        if not pending or partial:
            break
        if now_ms >= deadline_ms:
            raise HighwaterTimeoutError(f"list offsets not done in {timeout_ms:.0f} ms: {problem}")
        _, now_ms = yield Backoff(min(deadline_ms - now_ms, view.retry_backoff_ms))
    return results
