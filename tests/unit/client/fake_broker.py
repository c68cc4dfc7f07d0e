"""An in-process fake cluster for client tests: real TCP on 127.0.0.1, state in memory.

`FakeCluster(n)` listens on n ports (one per broker id 1..n) sharing one in-memory cluster:
topics with partitions, each partition a list of stored batches whose base offsets are stamped
on append (protocol.records.stamp_prefix), as a leader does. It answers Metadata, Produce,
Fetch (long-poll on min_bytes / max_wait_ms), ListOffsets, OffsetForLeaderEpoch, CreateTopics
and DeleteTopics. Only the partition's leader accepts Produce/Fetch/OffsetForLeaderEpoch and
ListOffsets (else NOT_LEADER_OR_FOLLOWER), except ListOffsets from the debug replica id -2,
which every replica answers with its own log end offset (`replica_log_end_offsets`, default
the leader's). The leader epoch is checked as KIP-320 says, so leader moves are visible to
clients; OffsetForLeaderEpoch answers from the epochs stamped in the stored batches (KIP-279).

Idempotent producers: InitProducerId (any broker) hands out producer ids from 1000, epoch 0.
Each partition checks and keeps its producers' state with the broker's own
broker.log.producer_state.ProducerStateManager (a resend answered with its original offset and
nothing of that request appended, a sequence gap, an older epoch; a refused request appends
nothing), so these rules cannot drift from the broker's. `produce_log` records each partition
answer as (topic, partition, base sequence of each batch, error code).

Consumer groups: `coordinator` (fake_coordinator.FakeCoordinator) answers FindCoordinator,
ConsumerGroupHeartbeat, OffsetCommit/Fetch/Delete, ConsumerGroupDescribe, ListGroups and
DeleteGroups.

Fault switches: `fail_next(api, code, topic, partition, times)` (`clear_injected()` forgets
those left), `drop_next(api)` (close the
connection instead of answering), `drop_after_append(times)` (append a produce, then close the
connection instead of answering: a lost acknowledgement), `delay_ms[api]`, `stalled`
((broker, api) pairs read but never answered), `move_leader(...)`, `bump_leader_epoch(...)`,
`truncate_to(...)`, `truncate_fetch=True` (cut fetch data exactly at partition_max_bytes,
leaving a partial batch at the end). Size limits, as a broker's: `max_message_bytes` (a batch
larger than this: MESSAGE_TOO_LARGE) and `segment_bytes` (a partition's batches in one request
larger than this together: RECORD_LIST_TOO_LARGE); a refused request appends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from broker.core.fetch_session import FetchSessionCache, answer_fetch, open_fetch
from broker.log.producer_state import ProducerStateManager
from protocol.apis import ApiKey
from protocol.codec import decode_request, encode_response
from protocol.errors import ErrorCode, HighwaterError
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages.common import BrokerEndpoint
from protocol.messages.create_topics import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    CreateTopicsResult,
)
from protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.messages.fetch import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import (
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopicResult,
)
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.records import (
    BatchHeader,
    decode_batch,
    iter_batch_headers,
    read_header,
    stamp_prefix,
)
from tests.unit.client.fake_coordinator import FakeCoordinator

__all__ = ["FakeCluster", "FakePartition"]

_FIRST_PRODUCER_ID = 1000


@dataclass
class FakePartition:
    leader: int
    leader_epoch: int = 0
    replicas: tuple[int, ...] = ()
    batches: list[tuple[int, bytes]] = field(default_factory=list)  # (base offset, bytes)
    log_end_offset: int = 0
    log_start_offset: int = 0
    high_watermark: int | None = None  # None: HW = LEO
    isr: tuple[int, ...] | None = None  # None: every replica
    offline_replicas: tuple[int, ...] = ()
    replica_log_end_offsets: dict[int, int] = field(default_factory=dict)  # followers' LEOs
    # The leader's OffsetForLeaderEpoch answer (epoch, end offset) for every epoch, if set.
    epoch_end_override: tuple[int, int] | None = None
    producer_state: ProducerStateManager = field(default_factory=ProducerStateManager)

    @property
    def hw(self) -> int:
        return self.log_end_offset if self.high_watermark is None else self.high_watermark

    def replica_log_end_offset(self, broker_id: int) -> int:
        if broker_id == self.leader:
            return self.log_end_offset
        return self.replica_log_end_offsets.get(broker_id, self.log_end_offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) as a leader-epoch cache would hold them: from the batches'
        stamped epochs, plus the current epoch starting at the LEO if no batch has it yet."""
        entries: list[tuple[int, int]] = []
        for base, data in self.batches:
            epoch = int.from_bytes(data[12:16], "big", signed=True)
            if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                entries.append((epoch, base))
        if not entries or self.leader_epoch > entries[-1][0]:
            entries.append((self.leader_epoch, self.log_end_offset))
        return entries

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """KIP-279 (Kafka's LeaderEpochFileCache.endOffsetFor): (largest epoch <= `epoch`, the
        start of the next epoch or the LEO); (-1, -1) when undefined."""
        if self.epoch_end_override is not None:
            return self.epoch_end_override
        entries = self.epoch_entries()
        if epoch < 0:
            return -1, -1
        if entries[-1][0] == epoch:
            return epoch, self.log_end_offset
        higher = next((e for e in entries if e[0] > epoch), None)
        if higher is None:
            return -1, -1
        floor = [e for e in entries if e[0] <= epoch]
        return (floor[-1][0] if floor else epoch), higher[1]


@dataclass
class _Injected:
    api: int
    code: int
    topic: str | None
    partition: int | None
    times: int


class FakeCluster:
    def __init__(self, num_brokers: int = 1, *, controller_epoch: int = 1) -> None:
        self.broker_ids = list(range(1, num_brokers + 1))
        self.ports: dict[int, int] = {}
        self.topics: dict[str, dict[int, FakePartition]] = {}
        self.controller_epoch = controller_epoch
        self.requests: list[tuple[int, Any]] = []  # (broker id, request body) in arrival order
        self.delay_ms: dict[int, float] = {}
        self.truncate_fetch = False
        self.max_message_bytes: int | None = None
        self.segment_bytes: int | None = None
        self.down: set[int] = set()  # brokers that drop every connection
        self.stalled: set[tuple[int, int]] = set()  # (broker id, api key): read, never answered
        self._injected: list[_Injected] = []
        self._drop: dict[int, int] = {}
        self._drop_after_append = 0
        self._appended = trio.Event()
        self._next_producer_id = _FIRST_PRODUCER_ID
        # (topic, partition, base sequence of each batch, error code) per produce answer
        self.produce_log: list[tuple[str, int, tuple[int, ...], int]] = []
        self.coordinator = FakeCoordinator(self)
        # Fetch sessions (KIP-227) with the broker's own core, one cache per broker.
        self.fetch_sessions = {b: FetchSessionCache(1000) for b in self.broker_ids}
        self.incremental_fetches = 0

    # ----- setup and faults ----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in self.broker_ids)

    async def start(self, nursery: trio.Nursery, ports: Mapping[int, int] | None = None) -> None:
        """Listen on loopback: on `ports[broker id]` if given, else on a free port."""
        for broker_id in self.broker_ids:
            port = (ports or {}).get(broker_id, 0)
            listeners = await nursery.start(
                partial(trio.serve_tcp, self._handler_for(broker_id), port, host="127.0.0.1")
            )
            self.ports[broker_id] = listeners[0].socket.getsockname()[1]

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        leaders: list[int] | None = None,
        replication_factor: int = 1,
    ) -> None:
        """Partition p led by leaders[p] (default: round robin), followed by the next brokers."""
        n = len(self.broker_ids)
        topic = {}
        for p in range(partitions):
            leader = leaders[p] if leaders else self.broker_ids[p % n]
            if leader in self.broker_ids:
                first = self.broker_ids.index(leader)
                replicas = tuple(
                    self.broker_ids[(first + k) % n] for k in range(replication_factor)
                )
            else:
                replicas = (leader,)
            topic[p] = FakePartition(leader=leader, replicas=replicas)
        self.topics[name] = topic

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        part = self.topics[topic][partition]
        part.leader = leader
        if leader not in part.replicas:
            part.replicas = (leader,)
        part.leader_epoch += 1

    def bump_leader_epoch(self, topic: str, partition: int) -> None:
        """A new leader epoch with the same leader (as after a broker's re-registration)."""
        self.topics[topic][partition].leader_epoch += 1

    def truncate_to(self, topic: str, partition: int, offset: int) -> None:
        """Drop every batch at or after `offset` (a batch boundary), as an unclean leader's
        log would lack them."""
        part = self.topics[topic][partition]
        assert offset in {base for base, _ in part.batches} | {part.log_end_offset}
        part.batches = [(base, data) for base, data in part.batches if base < offset]
        part.log_end_offset = offset
        part.producer_state.truncate_to(offset)
        part.high_watermark = None

    def fail_next(
        self,
        api: int,
        code: ErrorCode,
        topic: str | None = None,
        partition: int | None = None,
        times: int = 1,
    ) -> None:
        self._injected.append(_Injected(api, code, topic, partition, times))

    def drop_next(self, api: int, times: int = 1) -> None:
        self._drop[api] = self._drop.get(api, 0) + times

    def clear_injected(self) -> None:
        """Forget the `fail_next` errors not used yet."""
        self._injected.clear()

    def drop_after_append(self, times: int = 1) -> None:
        """The next `times` produce requests are appended, then their connection is closed
        instead of answering (the acknowledgement is lost)."""
        self._drop_after_append += times

    def count(self, api: type) -> int:
        return sum(1 for _, body in self.requests if isinstance(body, api))

    def validations(self) -> list[tuple[int, int, int]]:
        """(broker, asked epoch, current leader epoch) of each OffsetForLeaderEpoch received."""
        return [
            (broker, p.leader_epoch, p.current_leader_epoch)
            for broker, body in self.requests
            if isinstance(body, OffsetForLeaderEpochRequest)
            for t in body.topics
            for p in t.partitions
        ]

    def records(self, topic: str, partition: int) -> list[Any]:
        """Every stored record of a partition, decoded."""
        out: list[Any] = []
        for _, data in self.topics[topic][partition].batches:
            out.extend(decode_batch(data).records)
        return out

    def batch_headers(self, topic: str, partition: int) -> list[BatchHeader]:
        """The header of every stored batch of a partition, in order."""
        return [read_header(data) for _, data in self.topics[topic][partition].batches]

    def _take_injected(self, api: int, topic: str, partition: int) -> int:
        for item in self._injected:
            if (
                item.api == api
                and item.times > 0
                and item.topic in (None, topic)
                and item.partition in (None, partition)
            ):
                item.times -= 1
                return item.code
        return 0

    # ----- serving ----------------------------------------------------------------------------

    def _handler_for(self, broker_id: int) -> Callable[[trio.SocketStream], Any]:
        async def handle(stream: trio.SocketStream) -> None:
            decoder = FrameDecoder()
            try:
                while True:
                    data = await stream.receive_some(65536)
                    if not data or broker_id in self.down:
                        return
                    decoder.receive_data(data)
                    while (frame := decoder.next_frame()) is not NEED_DATA:
                        assert isinstance(frame, bytes)
                        request = decode_request(frame)
                        header = request.header
                        self.requests.append((broker_id, request.body))
                        if self._drop.get(header.api_key, 0) > 0:
                            self._drop[header.api_key] -= 1
                            return
                        if (broker_id, header.api_key) in self.stalled:
                            await trio.sleep_forever()
                        delay = self.delay_ms.get(header.api_key, 0)
                        if delay:
                            await trio.sleep(delay / 1000)
                        body = await self._answer(broker_id, request.body)
                        if isinstance(request.body, ProduceRequest) and self._drop_after_append:
                            self._drop_after_append -= 1
                            return
                        if body is None:
                            continue  # acks=0
                        await stream.send_all(
                            encode_response(
                                header.correlation_id, header.api_key, header.api_version, body
                            )
                        )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            finally:
                await stream.aclose()

        return handle

    async def _answer(self, broker_id: int, body: Any) -> Any:
        if isinstance(body, MetadataRequest):
            return self._metadata(body)
        if isinstance(body, ProduceRequest):
            return self._produce(broker_id, body)
        if isinstance(body, FetchRequest):
            return await self._fetch(broker_id, body)
        if isinstance(body, ListOffsetsRequest):
            return self._list_offsets(broker_id, body)
        if isinstance(body, OffsetForLeaderEpochRequest):
            return self._offset_for_leader_epoch(broker_id, body)
        if isinstance(body, CreateTopicsRequest):
            return self._create_topics(body)
        if isinstance(body, DeleteTopicsRequest):
            return self._delete_topics(body)
        if isinstance(body, InitProducerIdRequest):
            return self._init_producer_id()
        if self.coordinator.handles(body):
            return self.coordinator.answer(broker_id, body)
        raise AssertionError(f"fake broker: unexpected {type(body).__name__}")

    def _metadata(self, request: MetadataRequest) -> MetadataResponse:
        names = sorted(self.topics) if request.topics is None else request.topics
        topics = []
        for name in names:
            parts = self.topics.get(name)
            if parts is None:
                topics.append(MetadataTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name, ()))
                continue
            topics.append(
                MetadataTopic(
                    0,
                    name,
                    tuple(
                        MetadataPartition(
                            0,
                            p,
                            part.leader,
                            part.leader_epoch,
                            part.replicas,
                            part.replicas if part.isr is None else part.isr,
                            part.offline_replicas,
                        )
                        for p, part in sorted(parts.items())
                    ),
                )
            )
        return MetadataResponse(
            brokers=tuple(
                BrokerEndpoint(b, "127.0.0.1", self.ports[b])
                for b in self.broker_ids
                if b not in self.down
            ),
            cluster_id="fake-cluster",
            controller_id=self.broker_ids[0],
            topics=tuple(topics),
            controller_epoch=self.controller_epoch,
        )

    def _partition_error(
        self,
        api: int,
        broker_id: int,
        topic: str,
        partition: int,
        epoch: int = -1,
        *,
        any_replica: bool = False,
    ) -> int:
        injected = self._take_injected(api, topic, partition)
        if injected:
            return injected
        part = self.topics.get(topic, {}).get(partition)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if epoch >= 0 and epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch > part.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if part.leader != broker_id and not (any_replica and broker_id in part.replicas):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return 0

    def _init_producer_id(self) -> InitProducerIdResponse:
        code = self._take_injected(ApiKey.INIT_PRODUCER_ID, "", -1)
        if code:
            return InitProducerIdResponse(code)
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return InitProducerIdResponse(0, producer_id, 0)

    def _produce(self, broker_id: int, request: ProduceRequest) -> ProduceResponse | None:
        responses = []
        for topic in request.topic_data:
            answers = []
            for data in topic.partition_data:
                headers = list(iter_batch_headers(data.records))
                sequences = tuple(h.base_sequence for _, h in headers)
                code = self._partition_error(ApiKey.PRODUCE, broker_id, topic.name, data.index)
                if not code:
                    code = self._size_error(data.records, headers)
                base = -1
                if not code:
                    part = self.topics[topic.name][data.index]
                    code, base = self._append(part, data.records, headers)
                self.produce_log.append((topic.name, data.index, sequences, code))
                answers.append(ProducePartitionResponse(data.index, code, base_offset=base))
            responses.append(ProduceTopicResponse(topic.name, tuple(answers)))
        self._appended.set()
        self._appended = trio.Event()
        if request.acks == 0:
            return None
        return ProduceResponse(tuple(responses))

    def _size_error(self, records: bytes, headers: list[tuple[int, BatchHeader]]) -> int:
        limit = self.max_message_bytes
        if limit is not None and any(h.size > limit for _, h in headers):
            return ErrorCode.MESSAGE_TOO_LARGE
        if self.segment_bytes is not None and len(records) > self.segment_bytes:
            return ErrorCode.RECORD_LIST_TOO_LARGE
        return ErrorCode.NONE

    def _append(
        self, part: FakePartition, records: bytes, headers: list[tuple[int, BatchHeader]]
    ) -> tuple[int, int]:
        """(error code, base offset), as a Kafka leader: the batches are checked in order
        against the producer state (the broker's own ProducerStateManager) first, so a refused
        request appends nothing, and a request holding a resend appends nothing and is answered
        with the resent batch's offset."""
        try:
            duplicate = part.producer_state.check_leader_append([h for _, h in headers])
        except HighwaterError as exc:
            return exc.code, -1
        if duplicate is not None:
            return 0, duplicate.first_offset
        base = part.log_end_offset
        for pos, header in headers:
            raw = records[pos : pos + header.size]
            stamped = (
                stamp_prefix(part.log_end_offset, header.batch_length, part.leader_epoch) + raw[16:]
            )
            part.batches.append((part.log_end_offset, stamped))
            part.producer_state.update(read_header(stamped))
            part.log_end_offset += header.record_count
        return 0, base

    def _fetch_partition(self, broker_id: int, topic: str, p: Any) -> FetchPartitionData:
        code = self._partition_error(
            ApiKey.FETCH, broker_id, topic, p.partition, p.current_leader_epoch
        )
        if code:
            return FetchPartitionData(p.partition, code, -1, -1, b"")
        part = self.topics[topic][p.partition]
        if not part.log_start_offset <= p.fetch_offset <= part.log_end_offset:
            return FetchPartitionData(
                p.partition, ErrorCode.OFFSET_OUT_OF_RANGE, part.hw, part.log_start_offset, b""
            )
        out = bytearray()
        for base, data in part.batches:
            last = base + int.from_bytes(data[23:27], "big")
            if last < p.fetch_offset or base >= part.hw:
                continue
            if out and len(out) + len(data) > p.partition_max_bytes and not self.truncate_fetch:
                break
            out += data
            if len(out) >= p.partition_max_bytes:
                break
        if self.truncate_fetch:
            out = out[: p.partition_max_bytes]
        return FetchPartitionData(p.partition, 0, part.hw, part.log_start_offset, bytes(out))

    async def _fetch(self, broker_id: int, request: FetchRequest) -> FetchResponse:
        now_ms = int(trio.current_time() * 1000)
        session = open_fetch(self.fetch_sessions[broker_id], request, now_ms)
        if session.error != ErrorCode.NONE:
            return answer_fetch(session, FetchResponse(session.error, ()))
        self.incremental_fetches += session.incremental
        return answer_fetch(session, await self._read_fetch(broker_id, session.request))

    async def _read_fetch(self, broker_id: int, request: FetchRequest) -> FetchResponse:
        deadline = trio.current_time() + request.max_wait_ms / 1000
        while True:
            responses = [
                FetchTopicResponse(
                    t.topic,
                    tuple(self._fetch_partition(broker_id, t.topic, p) for p in t.partitions),
                )
                for t in request.topics
            ]
            size = sum(len(p.records) for t in responses for p in t.partitions)
            errors = any(p.error_code for t in responses for p in t.partitions)
            if size >= request.min_bytes or errors or trio.current_time() >= deadline:
                return FetchResponse(0, tuple(responses))
            with trio.move_on_at(deadline):
                await self._appended.wait()

    def _list_offsets(self, broker_id: int, request: ListOffsetsRequest) -> ListOffsetsResponse:
        topics = []
        for t in request.topics:
            answers = []
            for p in t.partitions:
                code = self._partition_error(
                    ApiKey.LIST_OFFSETS,
                    broker_id,
                    t.name,
                    p.partition_index,
                    p.current_leader_epoch,
                    any_replica=request.replica_id == -2,
                )
                if code:
                    answers.append(ListOffsetsPartitionResponse(p.partition_index, code))
                    continue
                part = self.topics[t.name][p.partition_index]
                if p.timestamp == -2:
                    offset = part.log_start_offset
                elif p.timestamp == -1 and request.replica_id == -2:
                    offset = part.replica_log_end_offset(broker_id)
                elif p.timestamp == -1:
                    offset = part.hw
                else:
                    offset = -1
                    for _, data in part.batches:
                        for record in decode_batch(data).records:
                            if record.timestamp_ms >= p.timestamp and record.offset < part.hw:
                                offset = record.offset
                                break
                        if offset >= 0:
                            break
                answers.append(
                    ListOffsetsPartitionResponse(
                        p.partition_index, 0, offset=offset, leader_epoch=part.leader_epoch
                    )
                )
            topics.append(ListOffsetsTopicResponse(t.name, tuple(answers)))
        return ListOffsetsResponse(tuple(topics))

    def _offset_for_leader_epoch(
        self, broker_id: int, request: OffsetForLeaderEpochRequest
    ) -> OffsetForLeaderEpochResponse:
        topics = []
        for t in request.topics:
            results = []
            for p in t.partitions:
                code = self._partition_error(
                    ApiKey.OFFSET_FOR_LEADER_EPOCH,
                    broker_id,
                    t.topic,
                    p.partition,
                    p.current_leader_epoch,
                )
                if code:
                    results.append(OffsetForLeaderEpochPartitionResult(code, p.partition))
                    continue
                epoch, end_offset = self.topics[t.topic][p.partition].end_offset_for(p.leader_epoch)
                results.append(
                    OffsetForLeaderEpochPartitionResult(0, p.partition, end_offset, epoch)
                )
            topics.append(OffsetForLeaderEpochTopicResult(t.topic, tuple(results)))
        return OffsetForLeaderEpochResponse(tuple(topics))

    def _create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        results = []
        for t in request.topics:
            if t.name in self.topics:
                code = ErrorCode.TOPIC_ALREADY_EXISTS
            elif t.replication_factor > len(self.broker_ids):
                code = ErrorCode.INVALID_REPLICATION_FACTOR
            elif t.num_partitions == 0 or t.num_partitions < -1:
                code = ErrorCode.INVALID_PARTITIONS
            else:
                code = ErrorCode.NONE
                if not request.validate_only:
                    self.create_topic(t.name, max(1, t.num_partitions))
            results.append(
                CreateTopicsResult(
                    t.name,
                    code,
                    None if code == 0 else f"{t.name}: {ErrorCode(code).name}",
                    t.num_partitions,
                    t.replication_factor,
                )
            )
        return CreateTopicsResponse(tuple(results))

    def _delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        results = []
        for name in request.topic_names:
            if name in self.topics:
                del self.topics[name]
                results.append(DeletableTopicResult(name, 0))
            else:
                results.append(DeletableTopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return DeleteTopicsResponse(tuple(results))
