"""Bad input for a broker, as the bytes a client writes: hypothesis strategies, and an oracle.

Every strategy yields a `FuzzInput`: the bytes to write on one fresh connection. The oracle,
`expected_outcome`, runs the protocol's own framing and decoding (protocol.framing,
protocol.codec, the code the broker runs) over those bytes and says what a broker following
docs/protocol.md must do with them: answer each request it can decode, in order (a Produce
with acks=0 excepted), and close the connection without a reply at the first frame it cannot
frame (§2) or decode (§4.4). `exchange` writes the bytes to a real socket and reads until the
broker closes; `check_reply` compares the two.

Strategies, by category:
- `random_inputs`: raw bytes, framed random bytes, framed random msgpack, a valid header with
  a random body;
- `mutated_inputs`: valid frames of every API and version with bytes set, flipped, inserted,
  deleted or duplicated (length prefix recomputed), or the whole frame cut short;
- `length_prefix_inputs`: declared lengths that are huge, negative, zero, longer or shorter
  than the body;
- `deep_nesting_inputs`: arrays and maps nested up to 100000 deep, at the top, in the header,
  as the body or as one field;
- `wrong_type_inputs`: schema-aware, one site of a full request of every API and version given
  a value of the wrong msgpack type or range, a missing or an extra field (protocol.schema);
- `nonsense_requests`: requests that decode, with values chosen to be nonsense (negative
  offsets, out-of-range partitions, acks=7, timeouts of -1, stale epochs, odd names);
- `group_sessions`: pipelined consumer-group requests on one connection, aimed at a group the
  target coordinates: a join under a member id the client picks, then nonsense requests of
  the eight group APIs as that member, so the coordinator's membership logic runs on them.

Requests that decode may act, so the fuzzers keep to `is_harmless` ones: nothing that could
append to, move or delete the topic under test or take orders meant for the controller's
brokers (see its docstring).
"""

from __future__ import annotations

import copy
import dataclasses
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import msgpack
import trio
from hypothesis import strategies as st

from protocol.apis import APIS, ApiKey
from protocol.codec import (
    MAX_MAP_ENTRIES,
    MAX_STRING_BYTES,
    Request,
    RequestDecodeError,
    RequestHeader,
    Response,
    decode_request,
    decode_response,
    encode_request,
)
from protocol.compression import Compression, compress
from protocol.errors import ErrorCode, FrameError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES, NEED_DATA, FrameDecoder, frame
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.records import CRC_START, Record, build_batch, build_batch_from_entries, crc32c
from protocol.schema import (
    MAX_ITEMS_DEFAULT,
    BoolType,
    BytesType,
    FloatType,
    IntType,
    IntWire,
    ListType,
    NullableType,
    StrType,
    StructType,
    WireType,
    encode_struct,
)
from protocol.topic_partition import OFFSETS_TOPIC

__all__ = [
    "ABSENT_TOPIC",
    "ClusterFacts",
    "Expected",
    "FuzzInput",
    "Reply",
    "api_key_of",
    "api_versions",
    "apis_named",
    "check_reply",
    "crafted_batches",
    "deep_nesting_inputs",
    "error_codes",
    "exchange",
    "expected_outcome",
    "full_requests",
    "group_sessions",
    "is_harmless",
    "known_bug",
    "length_prefix_inputs",
    "mutated_inputs",
    "nonsense_requests",
    "random_inputs",
    "request_frame",
    "wrong_type_inputs",
]

HOST: Final = "127.0.0.1"
ABSENT_TOPIC: Final = "fuzz-absent"  # never created: requests naming it act on nothing
_RECEIVE_BYTES: Final = 256 * 1024
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_UINT64_MAX: Final = (1 << 64) - 1
_INT64_MIN: Final = -(1 << 63)
# Fetch may long-poll up to max_wait_ms (capped at 60 s): longer waits are not bad input.
_MAX_FETCH_WAIT_MS: Final = 200
_BATCH_NOW_MS: Final = 1_700_000_000_000


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the strategies and the safety filter know of the cluster under test."""

    topic: str  # the topic whose data must not change
    broker_ids: frozenset[int]
    controller_epoch: int  # the current one; controller requests must carry an older one
    groups: tuple[str, ...] = ()  # group ids the fuzz target coordinates


@dataclass(frozen=True, slots=True)
class FuzzInput:
    data: bytes  # written as is on a fresh connection
    what: str  # for failure messages

    def __repr__(self) -> str:
        shown = self.data if len(self.data) <= 200 else self.data[:200] + b"..."
        return f"FuzzInput({self.what!r}, {len(self.data)} bytes: {shown!r})"


def api_versions() -> list[tuple[ApiKey, int]]:
    """Every (api, version) pair the protocol defines."""
    return [
        (spec.key, version)
        for spec in APIS.values()
        for version in range(spec.min_version, spec.max_version + 1)
    ]


def api_key_of(body: object) -> ApiKey:
    return next(spec.key for spec in APIS.values() if spec.request is type(body))


def apis_named(data: bytes) -> set[ApiKey]:
    """The APIs whose requests an input's frames are (or claim to be, by a header that
    decodes), for counting what the fuzzers reached."""
    decoder = FrameDecoder(DEFAULT_MAX_FRAME_BYTES)
    decoder.receive_data(data)
    found: set[ApiKey] = set()
    while True:
        try:
            body = decoder.next_frame()
        except FrameError:
            return found
        if body is NEED_DATA:
            return found
        assert isinstance(body, bytes)
        try:
            found.add(ApiKey(decode_request(body).header.api_key))
        except RequestDecodeError as exc:
            if exc.header is not None and exc.header.api_key in APIS:
                found.add(ApiKey(exc.header.api_key))
            return found


def request_frame(body: object, version: int = 0, correlation_id: int = 1) -> bytes:
    """A whole request frame (length prefix included) for `body`."""
    header = RequestHeader(api_key_of(body), version, correlation_id, "fuzz")
    return encode_request(header, body)


# ---------------------------------------------------------------------------------------------
# The oracle: what the broker must do with some bytes.


@dataclass(frozen=True, slots=True)
class Expected:
    """What a broker following docs/protocol.md does with the bytes of one connection."""

    answered: tuple[Request, ...]  # requests it must answer, in this order
    silent: tuple[Request, ...]  # requests it runs without answering (Produce acks=0)
    bad_frame: str | None  # why it must close without a reply; None: it waits for more
    api_versions_fallback: bool  # the bad frame is ApiVersions at an unsupported version

    @property
    def decoded(self) -> tuple[Request, ...]:
        return self.answered + self.silent


def expected_outcome(data: bytes, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Expected:
    decoder = FrameDecoder(max_frame_bytes)
    decoder.receive_data(data)
    answered: list[Request] = []
    silent: list[Request] = []
    while True:
        try:
            body = decoder.next_frame()
        except FrameError as exc:
            return Expected(tuple(answered), tuple(silent), str(exc), False)
        if body is NEED_DATA:
            return Expected(tuple(answered), tuple(silent), None, False)
        assert isinstance(body, bytes)
        try:
            request = decode_request(body)
        except RequestDecodeError as exc:
            # §4.4: an ApiVersions request at an unsupported version gets error 35, as in Kafka.
            fallback = (
                exc.header is not None
                and exc.header.api_key == ApiKey.API_VERSIONS
                and exc.code == ErrorCode.UNSUPPORTED_VERSION
            )
            return Expected(tuple(answered), tuple(silent), str(exc), fallback)
        if isinstance(request.body, ProduceRequest) and request.body.acks == 0:
            silent.append(request)
        else:
            answered.append(request)


@dataclass(frozen=True, slots=True)
class Reply:
    frames: tuple[bytes, ...]  # response frame bodies, in arrival order
    leftover_bytes: int  # bytes of an incomplete frame the broker left at its close
    elapsed_s: float


async def exchange(
    port: int, data: bytes, *, send_eof: bool, timeout_s: float, chunk_bytes: int = 0
) -> Reply:
    """Write `data` on a new connection (in `chunk_bytes` pieces if set), half-close it if
    `send_eof`, then read until the broker closes. Raises trio.TooSlowError after
    `timeout_s`: a broker that neither answers nor closes hangs the client."""
    started = trio.current_time()
    with trio.fail_after(timeout_s):
        stream = await trio.open_tcp_stream(HOST, port)
        async with stream:
            try:
                if chunk_bytes:
                    for at in range(0, len(data), chunk_bytes):
                        await stream.send_all(data[at : at + chunk_bytes])
                        await trio.sleep(0.001)  # separate TCP segments, separate reads
                else:
                    await stream.send_all(data)
                if send_eof:
                    await stream.send_eof()
            except trio.BrokenResourceError:
                pass  # the broker closed while we were still writing: read what it sent
            decoder = FrameDecoder(DEFAULT_MAX_FRAME_BYTES)
            frames: list[bytes] = []
            while True:
                try:
                    chunk = await stream.receive_some(_RECEIVE_BYTES)
                except trio.BrokenResourceError:  # reset: closed with our bytes unread
                    chunk = b""
                if not chunk:
                    break
                decoder.receive_data(chunk)
                while (body := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(body, bytes)
                    frames.append(body)
    return Reply(tuple(frames), decoder.buffered_bytes, trio.current_time() - started)


def error_codes(message: object) -> list[int]:
    """Every `error_code` in a response body, depth first."""
    found: list[int] = []
    if isinstance(message, tuple | list):
        for item in message:
            found.extend(error_codes(item))
    elif dataclasses.is_dataclass(message) and not isinstance(message, type):
        for f in dataclasses.fields(message):
            value = getattr(message, f.name)
            if f.name == "error_code":
                found.append(value)
            else:
                found.extend(error_codes(value))
    return found


_KNOWN_CODES: Final = frozenset(int(c) for c in ErrorCode) - {ErrorCode.UNKNOWN_SERVER_ERROR}


def check_reply(expected: Expected, reply: Reply) -> list[Response]:
    """The broker did what `expected` says: one well-formed response per answered request, in
    order, with its correlation id and only error codes of docs/protocol.md §7 (never
    UNKNOWN_SERVER_ERROR), and nothing else before it closed. Returns the responses."""
    frames = list(reply.frames)
    assert reply.leftover_bytes == 0, f"the broker closed mid-frame ({reply.leftover_bytes} B)"
    if expected.api_versions_fallback and len(frames) == len(expected.answered) + 1:
        fallback = decode_response(frames.pop(), ApiKey.API_VERSIONS, 0)
        assert fallback.body.error_code == ErrorCode.UNSUPPORTED_VERSION, fallback
    assert len(frames) == len(expected.answered), (
        f"expected {len(expected.answered)} responses"
        f"{' then a close (' + expected.bad_frame + ')' if expected.bad_frame else ''}, "
        f"got {len(frames)}"
    )
    responses = []
    for request, body in zip(expected.answered, frames, strict=True):
        header = request.header
        response = decode_response(body, header.api_key, header.api_version)
        assert response.header.correlation_id == header.correlation_id, (header, response)
        unknown = [c for c in error_codes(response.body) if c not in _KNOWN_CODES]
        assert not unknown, f"error codes {unknown} in {response.body!r:.2000}"
        responses.append(response)
    return responses


# ---------------------------------------------------------------------------------------------
# What a fuzzer may send: nothing that acts on the topic under test or on the cluster.


def is_harmless(request: Request, facts: ClusterFacts) -> bool:
    """Whether running `request` leaves the cluster as it was, and answers at once.

    Refused: a Produce with acks 0, 1 or -1 naming the topic under test (it could append);
    LeaderAndIsr, StopReplica and UpdateMetadata unless their controller epoch is stale (a
    newer one is obeyed: there is no authentication, docs/protocol.md §1); ControlledShutdown
    for a live broker id; CreateTopics without validate_only; DeleteTopics naming the topic;
    CreatePartitions (unless validate_only), ElectLeaders and AlterPartitionReassignments
    naming the topic or `__consumer_offsets` (clients may do that to the offsets topic: it
    would move or add group coordinators' partitions), or, for ElectLeaders, every partition;
    a Fetch claiming to be a replica (it moves the leader's view of that follower) or
    long-polling. Produce to and DeleteTopics of `__consumer_offsets` are sent: the broker
    refuses them (docs/protocol.md §5.20)."""
    body = request.body
    topic = facts.topic
    kept = (topic, OFFSETS_TOPIC)
    if isinstance(body, ProduceRequest):
        named = any(t.name == topic for t in body.topic_data)
        return not named or body.acks not in (-1, 0, 1)
    if isinstance(body, LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest):
        return body.controller_epoch < facts.controller_epoch
    if isinstance(body, ControlledShutdownRequest):
        return body.broker_id not in facts.broker_ids
    if isinstance(body, CreateTopicsRequest):
        return body.validate_only
    if isinstance(body, DeleteTopicsRequest):
        return topic not in body.topic_names
    if isinstance(body, CreatePartitionsRequest):
        return body.validate_only or all(t.name not in kept for t in body.topics)
    if isinstance(body, ElectLeadersRequest):
        chosen = body.topic_partitions
        return chosen is not None and all(t.topic not in kept for t in chosen)
    if isinstance(body, AlterPartitionReassignmentsRequest):
        return all(t.name not in kept for t in body.topics)
    if isinstance(body, FetchRequest):
        replica = body.replica_id in facts.broker_ids
        return not replica and (body.max_wait_ms <= _MAX_FETCH_WAIT_MS or body.min_bytes <= 0)
    return True


# Room for the words an error message puts around a name (at most ~50 characters).
_MESSAGE_OVERHEAD_BYTES: Final = 100
# Requests whose responses carry an `error_message`.
_ERROR_MESSAGE_REQUESTS: Final = (
    ProduceRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    CreatePartitionsRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
)


def _strings(message: object) -> Iterator[str]:
    """Every str in a request body, depth first."""
    if isinstance(message, str):
        yield message
    elif isinstance(message, tuple | list):
        for item in message:
            yield from _strings(item)
    elif dataclasses.is_dataclass(message) and not isinstance(message, type):
        for f in dataclasses.fields(message):
            yield from _strings(getattr(message, f.name))


def known_bug(request: Request) -> str | None:
    """Why sending `request` would trip a known broker bug (a test in test_bad_input shows
    each), or None. Fuzzers skip such requests so that the rest still runs; add an entry when
    a bug is found, drop it once the bug is fixed. None known now: the two found by these
    fuzzers (an error message quoting a 32 KiB name stopped the broker; CreatePartitions built
    a ZooKeeper path from an unvalidated name) are fixed."""
    del request
    return None


# ---------------------------------------------------------------------------------------------
# Record batches for Produce: one valid, the others broken in one way each (docs §6).

_RECORD_COUNT_AT: Final = 57
_ATTRIBUTES_AT: Final = 21
_LAST_OFFSET_DELTA_AT: Final = 23


def _edited(batch: bytes, *edits: tuple[int, str, int], recrc: bool) -> bytes:
    """`batch` with struct-packed values written at byte offsets; the CRC redone if asked."""
    out = bytearray(batch)
    for at, fmt, value in edits:
        struct.pack_into(fmt, out, at, value)
    if recrc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[CRC_START:])))
    return bytes(out)


@cache
def crafted_batches() -> dict[str, bytes]:
    """name -> records bytes; "valid" is appendable, every other one is refused."""
    good = build_batch([Record(b"fuzz", b"k")], now_ms=_BATCH_NOW_MS)
    bad_crc = good[:-1] + bytes([good[-1] ^ 0xFF])
    return {
        "valid": good,
        "bad_crc": bad_crc,
        "bad_magic": _edited(good, (16, ">b", 1), recrc=False),
        "base_offset_5": _edited(good, (0, ">q", 5), recrc=False),
        "count_mismatch": _edited(good, (_RECORD_COUNT_AT, ">i", 3), recrc=True),
        "zero_count": _edited(
            good, (_RECORD_COUNT_AT, ">i", 0), (_LAST_OFFSET_DELTA_AT, ">i", -1), recrc=True
        ),
        "codec_5": _edited(good, (_ATTRIBUTES_AT, ">h", 5), recrc=True),
        "codec_7": _edited(good, (_ATTRIBUTES_AT, ">h", 7), recrc=True),
        "length_negative": _edited(good, (8, ">i", -1), recrc=False),
        "length_huge": _edited(good, (8, ">i", _INT32_MAX), recrc=False),
        "truncated": good[:-5],
        "short": good[:30],
        "empty": b"",
        "valid_then_bad_crc": good + bad_crc,
        # No poison batches: an intact envelope around records that do not decompress, do not
        # decode or disagree with the header.
        "gzip_flag_plain_records": _edited(good, (_ATTRIBUTES_AT, ">h", 1), recrc=True),
        "garbage_records": _with_records(b"\xc1" * 8),
        "str_value": _with_records(msgpack.packb([[0, 0, None, "v", []]])),
        "zstd_bomb": _with_records(
            compress(Compression.ZSTD, msgpack.packb([[0, 0, None, bytes(65 << 20), []]])),
            codec=Compression.ZSTD,
        ),
        "offset_delta_1": _with_records(msgpack.packb([[0, 1, None, b"v", []]])),
        "max_timestamp_wrong": _with_records(msgpack.packb([[5, 0, None, b"v", []]])),
    }


def _with_records(section: bytes, codec: int = 0) -> bytes:
    """A batch of one record whose records section is `section` (base and max timestamp
    _BATCH_NOW_MS), with a coherent header and a valid CRC."""
    head = build_batch_from_entries(
        [[0, 0, None, b"v", []]], base_timestamp=_BATCH_NOW_MS, max_timestamp=_BATCH_NOW_MS
    )[:61]
    return _edited(
        head + section, (8, ">i", 49 + len(section)), (_ATTRIBUTES_AT, ">h", codec), recrc=True
    )


# ---------------------------------------------------------------------------------------------
# Requests: a full one of every API and version, and nonsense ones.


def _full_value(wire: WireType, version: int) -> Any:
    """A harmless value with every optional part present (each list one item, no nil): -7
    for every integer (stale epochs, invalid acks and counts, unknown partitions, timeouts
    that do not wait), the absent topic for every string, True for every bool (validate_only:
    create nothing)."""
    if isinstance(wire, IntWire):
        return -7
    if isinstance(wire, BoolType):
        return True
    if isinstance(wire, FloatType):
        return -7.0
    if isinstance(wire, StrType):
        return ABSENT_TOPIC
    if isinstance(wire, BytesType):
        return crafted_batches()["valid"]
    if isinstance(wire, NullableType):
        return _full_value(wire.inner, version)
    if isinstance(wire, ListType):
        return (_full_value(wire.inner, version),)
    if isinstance(wire, StructType):
        return wire.cls(**{f.name: _full_value(f.wire, version) for f in wire.fields})
    raise TypeError(f"no full value for {wire!r}")


def full_requests() -> list[tuple[RequestHeader, object]]:
    """A full, harmless request of every API at every version: every site of its schema is
    present, so mutating them reaches every field."""
    out = []
    for key, version in api_versions():
        body = _full_value(StructType(APIS[key].request, version), version)
        out.append((RequestHeader(key, version, 7, "fuzz"), body))
    return out


def _interesting_ints(bits: int) -> list[int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return [0, 1, 2, 3, 7, 99, -1, -2, -3, -4, -5, -7, low, low + 1, high, high - 1]


def _nonsense_int(int_type: IntType) -> st.SearchStrategy[int]:
    edges = st.sampled_from(_interesting_ints(int_type.bits))
    return edges | st.integers(int_type.min, int_type.max)


def _names(facts: ClusterFacts) -> st.SearchStrategy[str]:
    odd = [
        facts.topic,
        ABSENT_TOPIC,
        OFFSETS_TOPIC,
        *facts.groups,
        "",
        ".",
        "..",
        "a/b",
        "with space",
        "ünïcödé",
        "\x00",
        "x" * 249,
        "x" * 250,
        "é" * 16383,  # 32766 bytes: the longest strings the protocol carries
        "x" * MAX_STRING_BYTES,
    ]
    return st.sampled_from(odd) | st.text(max_size=12)


def _value(wire: WireType, facts: ClusterFacts) -> st.SearchStrategy[Any]:
    if isinstance(wire, IntWire):
        return _nonsense_int(wire.int_type)
    if isinstance(wire, BoolType):
        return st.booleans()
    if isinstance(wire, FloatType):
        return st.floats()  # NaN and infinities too: a quota's value must refuse them
    if isinstance(wire, StrType):
        return _names(facts)
    if isinstance(wire, BytesType):
        return st.sampled_from(sorted(crafted_batches().values())) | st.binary(max_size=80)
    if isinstance(wire, NullableType):
        return st.none() | _value(wire.inner, facts)
    if isinstance(wire, ListType):
        return st.lists(_value(wire.inner, facts), max_size=3).map(tuple)
    if isinstance(wire, StructType):
        fields = {f.name: _value(f.wire, facts) for f in wire.fields}
        cls = wire.cls
        return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))
    raise TypeError(f"no strategy for {wire!r}")


@st.composite
def nonsense_requests(draw: st.DrawFn, facts: ClusterFacts) -> FuzzInput:
    """A request of any API that decodes, with nonsense values; `is_harmless` decides whether
    it is sent."""
    key, version = draw(st.sampled_from(api_versions()))
    body = draw(_value(StructType(APIS[key].request, version), facts))
    correlation_id = draw(_nonsense_int(IntType(32)))
    client_id = draw(st.none() | _names(facts))
    header = RequestHeader(key, version, correlation_id, client_id)
    return FuzzInput(encode_request(header, body), f"{key.name} v{version} with nonsense values")


# ---------------------------------------------------------------------------------------------
# Consumer group sessions: nonsense aimed at a live group.

_GROUP_REQUESTS: Final = (
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetDeleteRequest,
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    ListGroupsRequest,
    FindCoordinatorRequest,
)
_FUZZ_MEMBERS: Final = ("fuzz-member-1", "fuzz-member-2", "fuzz-member-3")


def _aimed(body: Any, group: str, member: str | None, epoch: int | None) -> Any:
    """`body` with its group ids (keeping one nonsense id beside, where a list takes several),
    member id and member epoch replaced, where it has such fields."""
    names = {f.name for f in dataclasses.fields(body)}
    changes: dict[str, Any] = {}
    if "group_id" in names:
        changes["group_id"] = group
    for many in ("group_ids", "groups_names", "coordinator_keys"):
        if many in names:
            changes[many] = (group, *getattr(body, many)[:1])
    if "member_id" in names and member is not None:
        changes["member_id"] = member
    if "member_epoch" in names and epoch is not None:
        changes["member_epoch"] = epoch
    return dataclasses.replace(body, **changes)


@st.composite
def group_sessions(draw: st.DrawFn, facts: ClusterFacts) -> FuzzInput:
    """A join to one of `facts.groups` under a member id the client picks (mostly a valid
    one: rebalance timeout, subscription and no owned partitions), then up to five nonsense
    requests of the group APIs, most as that member with a small epoch (often its real one)."""
    group = draw(st.sampled_from(facts.groups))
    member = draw(st.sampled_from(_FUZZ_MEMBERS) | _names(facts))
    topics = st.sampled_from([facts.topic, ABSENT_TOPIC, OFFSETS_TOPIC]) | _names(facts)
    join = _aimed(
        draw(_value(StructType(ConsumerGroupHeartbeatRequest, 0), facts)), group, member, 0
    )
    join = dataclasses.replace(
        join,
        rebalance_timeout_ms=draw(st.integers(1, 300_000) | _nonsense_int(IntType(32))),
        subscribed_topic_names=draw(st.lists(topics, max_size=3).map(tuple) | st.none()),
        topic_partitions=draw(st.sampled_from([(), None]) | st.just(join.topic_partitions)),
        server_assignor=draw(st.sampled_from([None, "uniform", "range"]) | _names(facts)),
    )
    bodies: list[Any] = [join]
    for _ in range(draw(st.integers(0, 5))):
        body = draw(_value(StructType(draw(st.sampled_from(_GROUP_REQUESTS)), 0), facts))
        as_member = draw(st.integers(0, 3)) > 0
        epoch = draw(st.integers(-2, 6) | _nonsense_int(IntType(32)))
        bodies.append(_aimed(body, group, member if as_member else None, epoch))
    data = b"".join(
        encode_request(RequestHeader(api_key_of(body), 0, i, "fuzz"), body)
        for i, body in enumerate(bodies)
    )
    kinds = " ".join(type(body).__name__.removesuffix("Request") for body in bodies)
    return FuzzInput(data, f"group session: {kinds}")


# ---------------------------------------------------------------------------------------------
# Raw msgpack: values the packer will not write (invalid UTF-8, repeated keys, ...), spliced in
# where a placeholder `bin` was packed.


@dataclass(frozen=True, slots=True)
class Raw:
    data: bytes
    what: str


_LONG_STR: Final = MAX_STRING_BYTES + 1
RAW_VALUES: Final = (
    Raw(b"\xa3\xff\xfe\xfd", "str with invalid UTF-8"),
    Raw(b"\xda" + struct.pack(">H", _LONG_STR) + b"s" * _LONG_STR, "str of 32768 bytes"),
    Raw(b"\xc1", "the never-used byte 0xc1"),
    Raw(b"\xca\x3f\x80\x00\x00", "float 32"),
    Raw(b"\xcb" + struct.pack(">d", 1.5), "float 64"),
    Raw(b"\xd4\x01\x00", "fixext 1"),
    Raw(b"\xd6\xff\x00\x00\x00\x00", "timestamp ext"),
    Raw(b"\xc7\x00\x05", "ext 8, empty"),
    Raw(b"\x82\xa1a\x01\xa1a\x02", "map repeating a key"),
    Raw(b"\x81\xc4\x01a\x01", "map with a bin key"),
    Raw(b"\x81\x01\x01", "map with an int key"),
    Raw(
        b"\xde\x00\x41"
        + b"".join(
            b"\xa2k" + bytes([65 + i // 26, 97 + i % 26]) + b"\x00"
            for i in range(MAX_MAP_ENTRIES + 1)
        ),
        "map of 65 entries",
    ),
    Raw(b"\xdd\xff\xff\xff\xff", "array declaring 2**32-1 items"),
    Raw(b"\xdf\xff\xff\xff\xff", "map declaring 2**32-1 entries"),
    Raw(b"\xc6\x7f\xff\xff\xff", "bin declaring 2 GiB"),
    Raw(
        b"\xdd" + struct.pack(">I", MAX_ITEMS_DEFAULT + 1) + b"\xc0" * (MAX_ITEMS_DEFAULT + 1),
        "array of 100001 nils",
    ),
)


def _placeholder(index: int) -> bytes:
    return b"\xfe\xedRAW" + index.to_bytes(8, "big")


def _pack(plain: Any) -> bytes:
    """msgpack `plain`, splicing each Raw in as its bytes."""
    raws: list[Raw] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value)
            return _placeholder(len(raws))
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    packed: bytes = msgpack.packb(swap(plain), use_bin_type=True)
    for i, raw in enumerate(raws, start=1):
        token = _placeholder(i)
        packed_token = bytes([0xC4, len(token)]) + token  # bin 8
        assert packed.count(packed_token) == 1
        packed = packed.replace(packed_token, raw.data)
    return packed


# ---------------------------------------------------------------------------------------------
# Random bytes and random msgpack.

_SCALARS: Final = (
    st.none()
    | st.booleans()
    | st.integers(_INT64_MIN, _UINT64_MAX)
    | st.floats()
    | st.text(max_size=16)
    | st.binary(max_size=16)
)
_FIELD_NAMES: Final = sorted(
    {f.name for key, v in api_versions() for f in StructType(APIS[key].request, v).fields}
    | {"api_key", "api_version", "correlation_id", "client_id"}
)


def _msgpack_values() -> st.SearchStrategy[Any]:
    keys = st.sampled_from(_FIELD_NAMES) | st.text(max_size=8)
    return st.recursive(
        _SCALARS,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5)
        ),
        max_leaves=16,
    )


def _valid_headers() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda kv, cid: encode_struct(RequestHeader(kv[0], kv[1], cid, "fuzz"), 0),
        st.sampled_from(api_versions()),
        st.integers(_INT32_MIN, _INT32_MAX),
    )


def random_inputs() -> st.SearchStrategy[FuzzInput]:
    raw = st.binary(max_size=600).map(lambda b: FuzzInput(b, "raw bytes"))
    framed = st.binary(max_size=600).map(lambda b: FuzzInput(frame(b), "framed random bytes"))
    values = _msgpack_values().map(lambda v: FuzzInput(frame(_pack(v)), "framed random msgpack"))
    bodies = st.dictionaries(st.sampled_from(_FIELD_NAMES), _msgpack_values(), max_size=8)
    headed = st.tuples(_valid_headers(), bodies).map(
        lambda hb: FuzzInput(frame(_pack([hb[0], hb[1]])), "valid header, random body")
    )
    return st.one_of(raw, framed, values, headed)


# ---------------------------------------------------------------------------------------------
# Valid frames, mutated as bytes.


@st.composite
def mutated_inputs(draw: st.DrawFn, seeds: Sequence[tuple[RequestHeader, object]]) -> FuzzInput:
    header, body = draw(st.sampled_from(seeds))
    whole = encode_request(header, body)
    what = f"{ApiKey(header.api_key).name} v{header.api_version}"
    if draw(st.integers(0, 9)) == 0:  # cut the frame short: the broker waits, then sees EOF
        cut = draw(st.integers(0, len(whole) - 1))
        return FuzzInput(whole[:cut], f"{what} cut to {cut} bytes")
    data = bytearray(whole[4:])
    ops = []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["set", "flip", "insert", "delete", "duplicate"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 16))]
        ops.append(f"{op}@{at}")
    return FuzzInput(frame(bytes(data)), f"{what} {' '.join(ops)}")


# ---------------------------------------------------------------------------------------------
# Length prefixes.

_HUGE_LENGTHS: Final = st.integers(DEFAULT_MAX_FRAME_BYTES + 1, _INT32_MAX) | st.sampled_from(
    [DEFAULT_MAX_FRAME_BYTES + 1, _INT32_MAX]
)


@st.composite
def length_prefix_inputs(
    draw: st.DrawFn, seeds: Sequence[tuple[RequestHeader, object]]
) -> FuzzInput:
    header, body = draw(st.sampled_from(seeds))
    good = encode_request(header, body)[4:]
    kind = draw(
        st.sampled_from(["huge", "negative", "zero", "longer", "shorter", "then_bad_prefix"])
    )
    if kind == "huge":
        length = draw(_HUGE_LENGTHS)
        payload = good[: draw(st.integers(0, len(good)))]
    elif kind == "negative":
        length = draw(st.integers(_INT32_MIN, -1))
        payload = good[: draw(st.integers(0, len(good)))]
    elif kind == "zero":
        length, payload = 0, good if draw(st.booleans()) else b""
    elif kind == "longer":  # a truncated frame: the broker waits for the rest, then sees EOF
        length = len(good) + draw(st.integers(1, DEFAULT_MAX_FRAME_BYTES - len(good)))
        payload = good
    elif kind == "shorter":
        length = draw(st.integers(1, len(good) - 1))
        payload = good
    else:  # a good frame, then one with a bad length: answered, then closed
        length = len(good)
        payload = good + struct.pack(">i", draw(_HUGE_LENGTHS | st.integers(_INT32_MIN, -1)))
    return FuzzInput(struct.pack(">i", length) + payload, f"{kind} length {length}")


# ---------------------------------------------------------------------------------------------
# Deep nesting.


def _nested(kind: str, depth: int) -> bytes:
    """`depth` levels of one-item arrays, one-entry maps or both by turns, around a nil."""
    array, map_ = b"\x91", b"\x81\xa1k"
    if kind == "mixed":
        return (array + map_) * (depth // 2) + array * (depth % 2) + b"\xc0"
    return (array if kind == "array" else map_) * depth + b"\xc0"


@st.composite
def deep_nesting_inputs(
    draw: st.DrawFn, seeds: Sequence[tuple[RequestHeader, object]]
) -> FuzzInput:
    depth = draw(st.integers(1, 3000) | st.sampled_from([1023, 1024, 1025, 100_000]))
    kind = draw(st.sampled_from(["array", "map", "mixed"]))
    nested = Raw(_nested(kind, depth), f"{kind} nested {depth} deep")
    header, body = draw(st.sampled_from(seeds))
    plain = [encode_struct(header, 0), encode_struct(body, header.api_version)]
    where = draw(st.sampled_from(["frame", "header", "body", "field"]))
    if where == "frame":
        data = frame(nested.data)
    elif where == "header":
        data = frame(_pack([nested, plain[1]]))
    elif where == "body":
        data = frame(_pack([plain[0], nested]))
    else:
        sites = [p for p, _ in _sites(header, plain) if len(p) > 1]
        path = draw(st.sampled_from(sites))
        data = frame(_pack(_replaced(plain, path, nested)))
    return FuzzInput(data, f"{nested.what} at {where}")


# ---------------------------------------------------------------------------------------------
# Wrong types, schema-aware: one site of a full request gets a value its wire type rejects.

Path = tuple[str | int, ...]


def _wire_sites(wire: WireType, plain: Any, path: Path) -> Iterator[tuple[Path, WireType]]:
    yield path, wire
    if isinstance(wire, NullableType):
        if plain is not None:
            yield from list(_wire_sites(wire.inner, plain, path))[1:]
    elif isinstance(wire, ListType):
        for i, item in enumerate(plain):
            yield from _wire_sites(wire.inner, item, (*path, i))
    elif isinstance(wire, StructType):
        for f in wire.fields:
            yield from _wire_sites(f.wire, plain[f.name], (*path, f.name))


def _sites(header: RequestHeader, plain: list[Any]) -> list[tuple[Path, WireType]]:
    """Every site of a frame's [header, body]: the two maps and everything inside."""
    body_wire = StructType(APIS[header.api_key].request, header.api_version)
    return [
        *_wire_sites(StructType(RequestHeader, 0), plain[0], (0,)),
        *_wire_sites(body_wire, plain[1], (1,)),
    ]


def _get(plain: Any, path: Path) -> Any:
    for key in path:
        plain = plain[key]
    return plain


def _replaced(plain: list[Any], path: Path, value: Any) -> list[Any]:
    out = copy.deepcopy(plain)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


_RAWS: Final = st.sampled_from(RAW_VALUES)
_ANY_INT: Final = st.integers(_INT64_MIN, _UINT64_MAX)  # what msgpack can carry


@cache
def _bad_values(wire: WireType) -> st.SearchStrategy[Any]:
    """Values of a msgpack type (or range) that `wire` rejects. Every Raw value is rejected
    wherever it goes: a limit of §3.3, an ext, a float, a bad or repeated key."""
    if isinstance(wire, NullableType):
        return _bad_values(wire.inner).filter(lambda v: v is not None)
    small_list = st.lists(st.integers(-3, 3), min_size=1, max_size=2)
    if isinstance(wire, FloatType):  # a msgpack float (32 or 64 bits) is what it takes
        return st.one_of(
            st.sampled_from([r for r in RAW_VALUES if "float" not in r.what]),
            _ANY_INT,
            st.booleans(),
            st.text(max_size=4),
            st.binary(max_size=4),
            st.none(),
            small_list,
        )
    options: list[st.SearchStrategy[Any]] = [_RAWS]
    if isinstance(wire, IntWire):
        options += [
            st.booleans(),
            st.floats(),
            st.text(max_size=4),
            st.binary(max_size=4),
            st.none(),
            small_list,
            st.integers(wire.int_type.max + 1, _UINT64_MAX),
        ]
        if wire.int_type.bits < 64:
            options.append(st.integers(_INT64_MIN, wire.int_type.min - 1))
    elif isinstance(wire, BoolType):
        options += [_ANY_INT, st.none(), st.text(max_size=4)]
    elif isinstance(wire, StrType):
        options += [st.binary(max_size=8), _ANY_INT, st.none(), small_list]
    elif isinstance(wire, BytesType):
        options += [st.text(max_size=8), _ANY_INT, st.none(), small_list]
    elif isinstance(wire, ListType):
        options += [
            st.dictionaries(st.text(max_size=3), _ANY_INT, max_size=2),
            st.text(max_size=3),
            _ANY_INT,
            st.none(),
            st.binary(max_size=3),
            _bad_values(wire.inner).map(lambda v: [v]),
        ]
    elif isinstance(wire, StructType):
        options += [st.text(max_size=3), _ANY_INT, st.none(), small_list, st.booleans()]
    return st.one_of(*options)


@st.composite
def wrong_type_inputs(draw: st.DrawFn, seeds: Sequence[tuple[RequestHeader, object]]) -> FuzzInput:
    header, body = draw(st.sampled_from(seeds))
    plain = [encode_struct(header, 0), encode_struct(body, header.api_version)]
    path, wire = draw(st.sampled_from(_sites(header, plain)))
    current = _get(plain, path)
    kinds = ["wrong value"]
    if isinstance(current, dict):
        kinds += ["extra field", "missing field"] if current else ["extra field"]
    kind = draw(st.sampled_from(kinds))
    if kind == "wrong value":
        value = draw(_bad_values(wire))
        mutated = _replaced(plain, path, value)
        shown = value.what if isinstance(value, Raw) else f"{value!r:.40}"
    elif kind == "extra field":
        name = draw(
            (st.sampled_from(_FIELD_NAMES) | st.text(max_size=8)).filter(lambda k: k not in current)
        )
        mutated = _replaced(plain, path, {**current, name: draw(_SCALARS)})
        shown = repr(name)
    else:
        name = draw(st.sampled_from(sorted(current)))
        mutated = _replaced(plain, path, {k: v for k, v in current.items() if k != name})
        shown = repr(name)
    api = f"{ApiKey(header.api_key).name} v{header.api_version}"
    where = ".".join(str(p) for p in path)
    return FuzzInput(frame(_pack(mutated)), f"{api} {kind} at {where}: {shown}")
