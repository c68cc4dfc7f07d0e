"""Fetch sessions, the broker's half (KIP-227; Kafka's FetchSession, FetchSessionCache and
FetchManager): which partitions a Fetch reads, and which of them its answer names.

`open_fetch` runs once per request, before the long poll: it creates, updates, closes or
refuses a session and returns the request to read (an incremental one reads every partition
of its session). A session belongs to the principal and listener that opened it: to anyone
else its id is unknown, so no one reads, advances or closes another's session. `answer_fetch`
filters the final answer. docs/architecture.md ("Fetch sessions") has the rules.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from broker.core.principal import ANONYMOUS, Principal
from protocol.errors import ErrorCode
from protocol.fetch_session import fetch_topics, next_epoch
from protocol.messages.fetch import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResponse,
)
from protocol.schema import MAX_ITEMS_DEFAULT
from protocol.topic_id import NO_TOPIC_ID
from protocol.topic_partition import TopicPartition

__all__ = [
    "EVICTION_MS",
    "IN_PROCESS",
    "MAX_SESSION_PARTITIONS",
    "CachedPartition",
    "FetchContext",
    "FetchSession",
    "FetchSessionCache",
    "SessionOwner",
    "answer_fetch",
    "open_fetch",
    "random_session_id",
]

# Kafka's min.incremental.fetch.session.eviction.ms: a session unused this long may make way
# for a new one. A session holds at most as many partitions as one request may name.
EVICTION_MS = 120_000
MAX_SESSION_PARTITIONS = MAX_ITEMS_DEFAULT
_MAX_SESSION_ID = 2**31 - 1


def random_session_id() -> int:
    """A new id, 1 to 2^31 - 1, from the system's secure random (Kafka draws from
    ThreadLocalRandom): an id cannot be guessed from the ids a client was given."""
    return 1 + secrets.randbelow(_MAX_SESSION_ID)


@dataclass(frozen=True, slots=True)
class SessionOwner:
    """Who opened a session (the authenticated principal) and through which listener."""

    principal: Principal = ANONYMOUS
    listener: str | None = None


IN_PROCESS = SessionOwner()  # the owner of requests made without a listener (tests, simulation)


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the client last asked, what it was last told."""

    fetch: FetchPartition
    # The topic's id when the client names topics by id (Fetch v13+, KIP-516): every read
    # checks it against the log's (Kafka keys its sessions by TopicIdPartition).
    topic_id: str = NO_TOPIC_ID
    high_watermark: int = -1
    log_start_offset: int = -1
    answered: bool = False  # a partition is named in the first answer after it joins
    # The last answer named that said nothing but the HW and log start (Partition's reused
    # empty_fetch_answer, while those stay the same): the very same object again is no news.
    quiet_answer: FetchPartitionData | None = None


@dataclass(slots=True)
class FetchSession:
    session_id: int
    replica_id: int  # a follower's sessions are privileged when the cache is full
    epoch: int  # the epoch the next incremental request must carry
    last_used_ms: int
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    owner: SessionOwner = IN_PROCESS
    # Every partition as the request to read (open_fetch), built again only when a request
    # names or forgets partitions: an idle follower's fetch names none. `read_order`: their
    # CachedPartitions in that order, as read_fetch answers them (answer_fetch).
    read_topics: tuple[FetchTopic, ...] | None = None
    read_order: tuple[CachedPartition, ...] = ()

    @property
    def privileged(self) -> bool:
        return self.replica_id >= 0


@dataclass(slots=True)
class FetchSessionCache:
    """The broker's sessions, least recently used first. `new_id` draws an id, 1 to 2^31 - 1
    (random_session_id; the simulation draws from its seed)."""

    max_slots: int
    new_id: Callable[[], int] = random_session_id
    sessions: dict[int, FetchSession] = field(default_factory=dict)

    def get(self, session_id: int, owner: SessionOwner = IN_PROCESS) -> FetchSession | None:
        """The session with this id, if `owner` opened it (to anyone else it does not exist)."""
        session = self.sessions.get(session_id)
        return session if session is not None and session.owner == owner else None

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self.sessions.pop(session.session_id, None)
        self.sessions[session.session_id] = session

    def create(
        self, replica_id: int, size: int, now_ms: int, owner: SessionOwner = IN_PROCESS
    ) -> FetchSession | None:
        """A new session, or None when the cache is full and nothing may be evicted for it
        (the client then fetches without one). A follower's session (replica_id >= 0) is
        privileged: the caller creates one only for a principal with CLUSTER_ACTION."""
        if len(self.sessions) >= self.max_slots and not self._evict_for(replica_id, size, now_ms):
            return None
        session_id = self._new_id()
        epoch = next_epoch(INITIAL_EPOCH)
        session = FetchSession(session_id, replica_id, epoch, now_ms, owner=owner)
        self.sessions[session_id] = session
        return session

    def _evict_for(self, replica_id: int, size: int, now_ms: int) -> bool:
        """Kafka's FetchSessionCache.tryEvict: a session unused for EVICTION_MS makes way for
        any other; otherwise a consumer's session makes way for a follower's, or for a
        consumer's with more partitions. The smallest such session goes first. `now_ms` and
        `last_used_ms` are on the monotonic clock (BrokerContext.now_ms; Kafka's lastUsedMs
        is the wall clock, so a step back there keeps idle sessions from being evicted)."""
        if not self.sessions:
            return False
        oldest = next(iter(self.sessions.values()))
        if now_ms - oldest.last_used_ms >= EVICTION_MS:
            del self.sessions[oldest.session_id]
            return True
        candidates = [s for s in self.sessions.values() if not s.privileged]
        if replica_id < 0:
            candidates = [s for s in candidates if len(s.partitions) < size]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (len(s.partitions), s.last_used_ms))
        del self.sessions[victim.session_id]
        return True

    def _new_id(self) -> int:
        """Kafka's FetchSessionCache.newSessionId: drawn until it is free."""
        while True:
            session_id = self.new_id()
            free = session_id not in self.sessions
            if INVALID_SESSION_ID < session_id <= _MAX_SESSION_ID and free:
                return session_id


@dataclass(slots=True)
class FetchContext:
    """One Fetch's view of its session: `request` is what to read (for an incremental fetch,
    every partition of the session); `error` refuses the whole request."""

    request: FetchRequest
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    incremental: bool = False


def open_fetch(
    cache: FetchSessionCache,
    request: FetchRequest,
    now_ms: int,
    owner: SessionOwner = IN_PROCESS,
) -> FetchContext:
    """Kafka's FetchManager.newContext, for the request of `owner` (who may use only the
    sessions it opened). A follower's fetch (replica_id >= 0) must be authorized before
    it gets here: it may open a privileged session."""
    session_id, epoch = request.session_id, request.session_epoch
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH):  # a full request: it closes the session named
        if session_id != INVALID_SESSION_ID and cache.get(session_id, owner) is not None:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return FetchContext(request)  # sessionless, as before KIP-227
        wanted = list(_partitions(request.topics))
        if len(wanted) > MAX_SESSION_PARTITIONS:
            return FetchContext(request)
        session = cache.create(request.replica_id, len(wanted), now_ms, owner)
        if session is not None:
            ids = _topic_ids(request.topics)
            for tp, fetch in wanted:
                session.partitions[tp] = CachedPartition(fetch, ids.get(tp.topic, NO_TOPIC_ID))
        return FetchContext(request, session=session)
    session = cache.get(session_id, owner)
    if session is None or session.replica_id != request.replica_id:  # no one else's session
        return FetchContext(request, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext(request, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    partitions = session.partitions
    if request.topics or request.forgotten_topics_data:
        session.read_topics = None
    named: set[TopicPartition] = set()
    ids = _topic_ids(request.topics)
    for tp, fetch in _partitions(request.topics):
        named.add(tp)
        cached = partitions.get(tp)
        if cached is None:
            partitions[tp] = CachedPartition(fetch, ids.get(tp.topic, NO_TOPIC_ID))
        else:
            cached.fetch = fetch
            cached.topic_id = ids.get(tp.topic, NO_TOPIC_ID)
    for forgotten in request.forgotten_topics_data:
        for index in forgotten.partitions:
            partitions.pop(TopicPartition(forgotten.topic, index), None)
    if len(partitions) > MAX_SESSION_PARTITIONS:
        cache.remove(session_id)
        return FetchContext(request, ErrorCode.INVALID_REQUEST)
    session.epoch = next_epoch(epoch)
    cache.touch(session, now_ms)
    # A request naming the whole session (one busy partition, say) is read as it came.
    if not request.forgotten_topics_data and len(named) == len(partitions) and _distinct(request):
        whole = request
    else:
        if session.read_topics is None:
            session.read_topics = _session_topics(partitions)
            session.read_order = tuple(
                partitions[TopicPartition(t.topic, p.partition)]
                for t in session.read_topics
                for p in t.partitions
            )
        whole = replace(request, topics=session.read_topics)
    return FetchContext(whole, session=session, incremental=True)


def answer_fetch(context: FetchContext, response: FetchResponse) -> FetchResponse:
    """The answer to send: an error alone; or every partition read (a full fetch), or only
    those with something new for the client (an incremental one: records, an error, or a
    high watermark or log start offset it has not been told). Either way the session
    remembers what the client now knows."""
    if context.error != ErrorCode.NONE:
        return FetchResponse(context.error, (), session_id=INVALID_SESSION_ID)
    session = context.session
    if session is None:
        return response  # read_fetch's answer: every partition, no session
    # The session's read request, unchanged since it was read (no fetch named or forgot a
    # partition meanwhile): its answers come in read_order, no lookup needed.
    in_order = session.read_order if context.request.topics is session.read_topics else None
    position = 0
    topics = []
    for topic in response.responses:
        named = []
        for data in topic.partitions:
            cached: CachedPartition | None
            if in_order is not None:
                cached = in_order[position]
                position += 1
            else:
                cached = session.partitions.get(TopicPartition(topic.topic, data.partition_index))
            if cached is None:  # forgotten while the fetch waited: the client no longer asks
                continue
            if context.incremental and (data is cached.quiet_answer or not _news(cached, data)):
                continue
            cached.high_watermark = data.high_watermark
            cached.log_start_offset = data.log_start_offset
            cached.answered = True
            cached.quiet_answer = None if _loud(data) else data
            named.append(data)
        if named:
            topics.append(FetchTopicResponse(topic.topic, tuple(named)))
    return FetchResponse(
        response.error_code,
        tuple(topics),
        response.throttle_time_ms,
        session_id=session.session_id,
    )


def _news(cached: CachedPartition, data: FetchPartitionData) -> bool:
    """Kafka's CachedPartition.maybeUpdateResponseData: must the client hear of this?"""
    return (
        not cached.answered
        or bool(data.records)
        or data.error_code != ErrorCode.NONE
        or data.high_watermark != cached.high_watermark
        or data.log_start_offset != cached.log_start_offset
        or data.diverging_epoch is not None
    )


def _loud(data: FetchPartitionData) -> bool:
    """Says more than the HW and log start: the client must hear it each time it comes."""
    return (
        bool(data.records) or data.error_code != ErrorCode.NONE or data.diverging_epoch is not None
    )


def _partitions(topics: Iterable[FetchTopic]) -> Iterable[tuple[TopicPartition, FetchPartition]]:
    for topic in topics:
        for fetch in topic.partitions:
            yield TopicPartition(topic.topic, fetch.partition), fetch


def _topic_ids(topics: Iterable[FetchTopic]) -> dict[str, str]:
    """The id of each topic named by id (resolve_topic_ids keeps it beside the name)."""
    return {t.topic: t.topic_id for t in topics if t.topic_id}


def _session_topics(partitions: dict[TopicPartition, CachedPartition]) -> tuple[FetchTopic, ...]:
    """Every partition of the session, grouped as a Fetch names them, each topic with the id
    its partitions were asked by (read_fetch checks it against the log's)."""
    if not any(c.topic_id for c in partitions.values()):
        return fetch_topics((tp, c.fetch) for tp, c in partitions.items())
    by_topic: dict[tuple[str, str], list[FetchPartition]] = {}
    for tp, cached in partitions.items():
        by_topic.setdefault((tp.topic, cached.topic_id), []).append(cached.fetch)
    return tuple(
        FetchTopic(topic, tuple(fetches), topic_id)
        for (topic, topic_id), fetches in sorted(by_topic.items())
    )


def _distinct(request: FetchRequest) -> bool:
    """No partition named twice (read_fetch would read it twice)."""
    return sum(len(t.partitions) for t in request.topics) == len(
        {(t.topic, p.partition) for t in request.topics for p in t.partitions}
    )
