"""Bad input over real sockets against a real 3-broker cluster: the broker never crashes or
hangs, answers with the right error or closes only that connection, other clients are served
throughout, and the stored data and high watermark do not change.

The fuzz target is the broker that leads the topic under test and is the controller, so the
admin APIs run their real paths. Each input goes on its own connection; the oracle
(tests/integration/fuzz_frames.py) says what the broker must answer before it closes. A canary
connection, opened before the first input and kept to the end, asks for Metadata every
CANARY_EVERY inputs. After each category: every broker process still runs, each replica's
batches (offsets, epochs, CRCs and bytes), log end offset and leader-epoch checkpoint, the
leader's high watermark, the partition's leader/epoch/ISR and the set of topics are as before,
no handler failed, and a fresh client produces and reads.

The fuzz target also coordinates consumer groups: `__consumer_offsets` (5 partitions) exists
before the first input, the names the fuzzers draw include groups the target coordinates, and
after each category a member joins one of its groups, commits and reads its offset back.

Hypothesis runs derandomized with an explicit max_examples per category (CATEGORY_EXAMPLES;
HIGHWATER_FUZZ_EXAMPLES=N runs N per category) and each test prints how many inputs it sent.
Broker bugs these fuzzers found have their own tests (they were strict xfails until fixed);
while a bug is open the fuzzers skip inputs that would trip it (fuzz_frames.known_bug) so
everything else still runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgpack
import pytest
import trio
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from broker.log.checkpoints import EpochEntry
from client.cli.zookeeper_server import ZooKeeperServer
from client.network import BrokerConnection, connect
from protocol.apis import APIS, ApiKey
from protocol.codec import RequestHeader, decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.framing import frame
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from protocol.messages.metadata import MetadataPartition, MetadataRequest, MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochTopic,
)
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.records import Record, build_batch
from protocol.topic_partition import OFFSETS_TOPIC
from tests.integration.cluster_harness import (
    BrokerProcess,
    Cluster,
    fetch_metadata,
    read_batch_headers,
)
from tests.integration.fuzz_frames import (
    ABSENT_TOPIC,
    ClusterFacts,
    FuzzInput,
    api_key_of,
    apis_named,
    check_reply,
    crafted_batches,
    deep_nesting_inputs,
    error_codes,
    exchange,
    expected_outcome,
    full_requests,
    group_sessions,
    is_harmless,
    known_bug,
    length_prefix_inputs,
    mutated_inputs,
    nonsense_requests,
    random_inputs,
    request_frame,
    wrong_type_inputs,
)
from tests.integration.group_checks import (
    find_coordinator,
    group_round_trip,
    groups_led_by,
    offsets_leaders,
)
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    BatchId,
    batch_ids,
    create_topic,
    high_watermark,
    log_end_offset,
    logged_events,
    partition_metadata,
    prepare_cluster,
    produce,
    read_committed,
    running_cluster,
    wait_converged,
    whole_cluster_around,
    zk_view,
)

pytestmark = [pytest.mark.integration]

TOPIC: Final = "bad-input"
SIDE_TOPIC: Final = "bad-input-after"  # where the after-checks produce
VALUES: Final = [f"record-{i}".encode() for i in range(20)]
CATEGORY_EXAMPLES: Final = {
    "random bytes": 500,
    "mutated frames": 600,
    "length prefixes": 300,
    "deep nesting": 150,
    "wrong types": 900,
    "nonsense values": 500,
    "group sessions": 300,
}
EXAMPLES_ENV: Final = "HIGHWATER_FUZZ_EXAMPLES"
CANARY_EVERY: Final = 25
OVERRIDES: Final = {**FAST_REPLICATION, "offsets.topic.num.partitions": "5"}
GROUP_APIS: Final = (
    ApiKey.FIND_COORDINATOR,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.OFFSET_DELETE,
    ApiKey.DELETE_GROUPS,
    ApiKey.LIST_GROUPS,
)
EXCHANGE_TIMEOUT_S: Final = 10.0
CANARY_TIMEOUT_S: Final = 5.0
INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1


def examples(category: str) -> int:
    return int(os.environ.get(EXAMPLES_ENV, CATEGORY_EXAMPLES[category]))


# -- the cluster and what must not change -------------------------------------------------


@dataclass(frozen=True)
class StoredState:
    """What bad input must leave as it is."""

    batches: dict[int, list[BatchId]]  # broker id -> its replica's batches
    digests: dict[int, str]  # broker id -> sha256 of its replica's batch bytes
    log_end_offsets: dict[int, int | None]
    epochs: dict[int, list[EpochEntry]]
    high_watermark: int | None
    partition: tuple[int, int, tuple[int, ...]] | None  # leader, leader epoch, ISR
    topics: frozenset[str]
    coordinators: tuple[int, ...]  # the leader of each __consumer_offsets partition


@dataclass
class Target:
    cluster: Cluster
    facts: ClusterFacts
    leader: BrokerProcess  # leads TOPIC and is the controller: the fuzz target
    follower: BrokerProcess
    broker_epoch: int  # the leader's (its registration's czxid)
    before: StoredState
    log_marks: dict[int, int] = field(default_factory=dict)  # where this test's logs start
    round_trips: int = 0  # groups the after-checks used


def _batch_bytes_digest(broker: BrokerProcess) -> str:
    """sha256 over each segment's name and the bytes of its valid batches."""
    digest = hashlib.sha256()
    for path in broker.segments(TOPIC, 0):
        size = sum(h.size for h in read_batch_headers(path))
        digest.update(path.name.encode() + path.read_bytes()[:size])
    return digest.hexdigest()


async def capture(cluster: Cluster, leader: BrokerProcess) -> StoredState:
    brokers = cluster.brokers.values()
    meta = await partition_metadata(leader, TOPIC, 0)
    all_meta = await fetch_metadata(leader.port)
    return StoredState(
        batches={b.broker_id: batch_ids(b.batch_headers(TOPIC, 0)) for b in brokers},
        digests={b.broker_id: _batch_bytes_digest(b) for b in brokers},
        log_end_offsets={b.broker_id: await log_end_offset(b, TOPIC, 0) for b in brokers},
        epochs={b.broker_id: b.leader_epoch_entries(TOPIC, 0) for b in brokers},
        high_watermark=await high_watermark(leader, TOPIC, 0),
        partition=None
        if meta is None
        else (meta.leader_id, meta.leader_epoch, tuple(sorted(meta.isr_nodes))),
        # __consumer_offsets included: _set_up creates it before the first input.
        topics=frozenset() if all_meta is None else frozenset(t.name for t in all_meta.topics),
        coordinators=_coordinators(all_meta),
    )


def _coordinators(meta: MetadataResponse | None) -> tuple[int, ...]:
    offsets = [t for t in meta.topics if t.name == OFFSETS_TOPIC] if meta is not None else []
    return tuple(p.leader_id for t in offsets for p in sorted(t.partitions, key=_index))


def _index(partition: MetadataPartition) -> int:
    return partition.partition_index


async def _set_up(cluster: Cluster) -> Target:
    port = cluster.running_brokers()[0].port
    conn = await connect("127.0.0.1", port)
    try:
        meta: MetadataResponse = await conn.request(MetadataRequest(None), 1)
    finally:
        await conn.aclose()
    controller = meta.controller_id
    others = sorted(b for b in cluster.brokers if b != controller)
    await create_topic(cluster, TOPIC, [[controller, *others]])
    await create_topic(cluster, SIDE_TOPIC, [[controller]])
    await produce(cluster, TOPIC, 0, VALUES)
    await wait_converged(list(cluster.brokers.values()), TOPIC, 0, len(VALUES))
    async with zk_view(cluster) as zk:
        registration = await zk.broker_registration(controller)
    assert registration is not None
    leader = cluster.brokers[controller]
    await find_coordinator(cluster, "fuzz")  # creates __consumer_offsets: no input does
    conn = await connect(leader.host, leader.port)
    try:
        led = groups_led_by(await offsets_leaders(conn), controller, "fuzz-group", 3)
    finally:
        await conn.aclose()
    facts = ClusterFacts(TOPIC, frozenset(cluster.brokers), meta.controller_epoch, led)
    before = await capture(cluster, leader)
    assert before.high_watermark == len(VALUES)
    assert before.partition is not None and before.partition[0] == controller
    return Target(cluster, facts, leader, cluster.brokers[others[0]], registration[0], before)


@pytest.fixture(scope="module")
def bad_input_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("bad-input")
    with running_cluster(zookeeper.port, directory, OVERRIDES) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def module_target(bad_input_cluster: Cluster) -> Target:
    return trio.run(_set_up, bad_input_cluster)


@pytest.fixture
def target(module_target: Target, request: pytest.FixtureRequest) -> Iterator[Target]:
    for _ in whole_cluster_around(module_target.cluster, request):
        module_target.log_marks = module_target.cluster.log_marks()
        yield module_target


async def assert_unharmed(target: Target, label: str) -> None:
    """Every broker runs, nothing stored changed, no handler failed, a fresh client works."""
    cluster = target.cluster
    for broker in cluster.brokers.values():
        assert broker.process is not None and broker.process.poll() is None, (
            f"broker {broker.broker_id} exited with {broker.process and broker.process.poll()}"
        )
        since = target.log_marks.get(broker.broker_id, 0)
        failed = logged_events(broker, "request handler failed", since=since)
        assert not failed, f"broker {broker.broker_id}: {failed[:3]}"
    after = await capture(cluster, target.leader)
    assert after == target.before, f"stored state changed:\n{target.before}\n{after}"
    value = f"after {label}".encode()
    await produce(cluster, SIDE_TOPIC, 0, [value])
    assert (await read_committed(cluster, SIDE_TOPIC, 0))[-1] == value
    assert await read_committed(cluster, TOPIC, 0) == VALUES
    target.round_trips += 1
    leader = target.leader
    (group,) = groups_led_by(
        target.before.coordinators, leader.broker_id, "after", target.round_trips
    )[-1:]
    conn = await connect(leader.host, leader.port)
    try:
        await group_round_trip(conn, group, SIDE_TOPIC)
    finally:
        await conn.aclose()


# -- the fuzz loop ------------------------------------------------------------------------


class Canary:
    """Another client's connection, open throughout: it must keep getting answers."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.pings = 0
        self.slowest_s = 0.0

    async def ping(self) -> None:
        started = trio.current_time()
        with trio.fail_after(CANARY_TIMEOUT_S):
            meta: MetadataResponse = await self.conn.request(MetadataRequest((TOPIC,)))
        (topic,) = meta.topics
        assert topic.error_code == ErrorCode.NONE and topic.partitions[0].leader_id >= 0
        self.pings += 1
        self.slowest_s = max(self.slowest_s, trio.current_time() - started)


@dataclass
class Tally:
    sent: int = 0
    answered: int = 0  # responses checked
    closed_on_bad_frame: int = 0
    skipped_harmful: int = 0
    skipped_known_bug: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    apis: Counter[ApiKey] = field(default_factory=Counter)  # inputs naming or built from each
    group_ok: Counter[ApiKey] = field(default_factory=Counter)  # group answers with no error
    first_failure: str | None = None


def _built_from(case: FuzzInput) -> set[ApiKey]:
    """The API of the valid request an input was made from, if it says ("OFFSET_COMMIT v0
    flip@12"): a mutated frame rarely decodes far enough to tell."""
    name = case.what.split()[0]
    return {ApiKey[name]} if name in ApiKey.__members__ else set()


def _settings(count: int) -> settings:
    return settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


async def fuzz(
    target: Target,
    category: str,
    strategy: st.SearchStrategy[FuzzInput],
    *,
    must_be_bad: bool = False,
) -> Tally:
    """Send what `strategy` draws, each input on its own connection, and check each reply.
    Hypothesis runs in a worker thread; each input is exchanged in this trio run."""
    count = examples(category)
    tally = Tally()
    port = target.leader.port
    canary = Canary(await connect("127.0.0.1", port, client_id="canary"))
    await canary.ping()

    def one(case: FuzzInput) -> None:
        expected = expected_outcome(case.data)
        if not all(is_harmless(r, target.facts) for r in expected.decoded):
            tally.skipped_harmful += 1
            reject()
        if any(known_bug(r) for r in expected.decoded):
            tally.skipped_known_bug += 1
            reject()
        tally.sent += 1
        tally.kinds[" ".join(case.what.split()[:2])] += 1
        tally.apis.update(apis_named(case.data) | _built_from(case))
        try:
            if must_be_bad:
                assert expected.bad_frame is not None, f"the input decodes: {expected}"
            reply = trio.from_thread.run(
                partial(
                    exchange,
                    port,
                    case.data,
                    send_eof=expected.bad_frame is None,
                    timeout_s=EXCHANGE_TIMEOUT_S,
                )
            )
            responses = check_reply(expected, reply)
            tally.answered += len(responses)
            for request, response in zip(expected.answered, responses, strict=True):
                api = ApiKey(request.header.api_key)
                if api in GROUP_APIS:  # count the answers without any error
                    tally.group_ok[api] += not any(error_codes(response.body))
            tally.closed_on_bad_frame += expected.bad_frame is not None
            if tally.sent % CANARY_EVERY == 0:
                trio.from_thread.run(canary.ping)
        except BaseException as exc:
            if tally.first_failure is None:
                tally.first_failure = f"{case!r}: {exc!r}"
            raise

    run = _settings(count)(given(strategy)(one))
    started = trio.current_time()
    try:
        await trio.to_thread.run_sync(run)
    except BaseException as exc:
        raise AssertionError(f"{category}: first failing input: {tally.first_failure}") from exc
    finally:
        await canary.conn.aclose()
    elapsed = trio.current_time() - started
    print(
        f"\n{category}: {tally.sent} inputs sent in {elapsed:.1f} s "
        f"({tally.answered} responses checked, {tally.closed_on_bad_frame} closed on a bad "
        f"frame; skipped: {tally.skipped_harmful} harmful, {tally.skipped_known_bug} known "
        f"bug); canary: {canary.pings} pings, slowest {canary.slowest_s * 1000:.0f} ms; "
        f"kinds: {dict(tally.kinds.most_common(8))}; "
        f"group APIs (inputs/answers without error): "
        f"{', '.join(f'{k.name} {tally.apis[k]}/{tally.group_ok[k]}' for k in GROUP_APIS)}"
    )
    assert tally.sent >= count, f"{category}: only {tally.sent} of {count} inputs sent"
    assert canary.pings >= tally.sent // CANARY_EVERY
    return tally


def seeds(facts: ClusterFacts) -> list[tuple[RequestHeader, object]]:
    """Valid requests to mutate: a full one of every API and version, and reads of the topic."""
    reads: list[tuple[int, object]] = [
        (0, _fetch()),
        (0, _list_offsets()),
        (1, MetadataRequest((facts.topic,))),
        (1, _offset_for_leader_epoch()),
    ]
    topic_reads = [(RequestHeader(api_key_of(b), v, 3, "fuzz"), b) for v, b in reads]
    return [*full_requests(), *topic_reads]


# -- categories ---------------------------------------------------------------------------


async def test_random_bytes(target: Target) -> None:
    await fuzz(target, "random bytes", random_inputs())
    await assert_unharmed(target, "random bytes")


async def test_mutated_valid_frames(target: Target) -> None:
    await fuzz(target, "mutated frames", mutated_inputs(seeds(target.facts)))
    await assert_unharmed(target, "mutated frames")


async def test_length_prefixes_huge_negative_zero_truncated(target: Target) -> None:
    tally = await fuzz(target, "length prefixes", length_prefix_inputs(seeds(target.facts)))
    assert {"huge length", "negative length", "zero length", "longer length"} <= set(tally.kinds)
    await assert_unharmed(target, "length prefixes")


async def test_deep_nesting(target: Target) -> None:
    await fuzz(target, "deep nesting", deep_nesting_inputs(seeds(target.facts)), must_be_bad=True)
    await assert_unharmed(target, "deep nesting")


async def test_wrong_types_in_every_field_of_every_api(target: Target) -> None:
    tally = await fuzz(target, "wrong types", wrong_type_inputs(full_requests()), must_be_bad=True)
    every_api = {f"{ApiKey(h.api_key).name} v{h.api_version}" for h, _ in full_requests()}
    assert set(tally.kinds) == every_api, f"not reached: {every_api - set(tally.kinds)}"
    await assert_unharmed(target, "wrong types")


async def test_nonsense_values_that_decode(target: Target) -> None:
    await fuzz(target, "nonsense values", nonsense_requests(target.facts))
    await assert_unharmed(target, "nonsense values")


async def test_group_sessions(target: Target) -> None:
    """The group APIs' nonsense, aimed at live groups of the target: joins succeed, and the
    members' nonsense heartbeats, commits and fetches reach the coordinator's checks."""
    tally = await fuzz(target, "group sessions", group_sessions(target.facts))
    assert set(GROUP_APIS) <= set(tally.apis), f"not reached: {set(GROUP_APIS) - set(tally.apis)}"
    assert tally.group_ok[ApiKey.CONSUMER_GROUP_HEARTBEAT] > 0, "no join succeeded"
    await assert_unharmed(target, "group sessions")


async def test_fragmented_and_pipelined_valid_frames_are_answered(target: Target) -> None:
    """Valid frames split into 1-7 byte writes are answered; all of them in one write are
    answered in order."""
    requests = [encode_request(h, b) for h, b in seeds(target.facts)]
    for i, data in enumerate(requests):
        expected = expected_outcome(data)
        reply = await exchange(
            target.leader.port, data, send_eof=True, timeout_s=30, chunk_bytes=1 + i % 7
        )
        check_reply(expected, reply)
    everything = b"".join(requests)
    expected = expected_outcome(everything)
    assert len(expected.answered) == len(requests)
    reply = await exchange(target.leader.port, everything, send_eof=True, timeout_s=30)
    check_reply(expected, reply)
    print(f"\nfragmented and pipelined: {2 * len(requests)} valid frames answered")
    await assert_unharmed(target, "fragmented frames")


# -- valid frames with nonsense values: the exact errors ---------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    body: object
    codes: frozenset[int]  # the non-zero error codes allowed; empty: success
    version: int = 0
    to_follower: bool = False
    required: bool = True  # one of `codes` must show (else success is fine too)


def case(name: str, body: object, *codes: int, version: int = 0, to_follower: bool = False) -> Case:
    return Case(name, body, frozenset(codes), version, to_follower)


def maybe(name: str, body: object, *codes: int) -> Case:
    """Either success or one of `codes`: the protocol does not say which."""
    return Case(name, body, frozenset(codes), required=False)


def _produce(
    records: bytes, *, acks: int = 1, partition: int = 0, topic: str = TOPIC, timeout_ms: int = 1000
) -> ProduceRequest:
    data = ProducePartitionData(partition, records)
    return ProduceRequest(acks, timeout_ms, (ProduceTopicData(topic, (data,)),))


def _fetch(
    offset: int = 0,
    *,
    partition: int = 0,
    topic: str = TOPIC,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    current_leader_epoch: int = -1,
    isolation_level: int = 0,
) -> FetchRequest:
    wanted = FetchPartition(partition, offset, partition_max_bytes, current_leader_epoch)
    return FetchRequest(
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        (FetchTopic(topic, (wanted,)),),
        isolation_level,
    )


def _list_offsets(
    timestamp: int = -1,
    *,
    partition: int = 0,
    topic: str = TOPIC,
    current_leader_epoch: int = -1,
    replica_id: int = -1,
    isolation_level: int = 0,
) -> ListOffsetsRequest:
    wanted = ListOffsetsPartition(partition, timestamp, current_leader_epoch)
    return ListOffsetsRequest(replica_id, (ListOffsetsTopic(topic, (wanted,)),), isolation_level)


def _offset_for_leader_epoch(
    leader_epoch: int = 0, *, partition: int = 0, current_leader_epoch: int = -1
) -> OffsetForLeaderEpochRequest:
    wanted = OffsetForLeaderEpochPartition(partition, leader_epoch, current_leader_epoch)
    return OffsetForLeaderEpochRequest((OffsetForLeaderEpochTopic(TOPIC, (wanted,)),))


def _create(
    name: str = "fuzz-new",
    partitions: int = 1,
    rf: int = 1,
    *,
    assignments: tuple[CreatableReplicaAssignment, ...] = (),
    configs: tuple[CreatableTopicConfig, ...] = (),
) -> CreateTopicsRequest:
    topic = CreatableTopic(name, partitions, rf, assignments, configs)
    return CreateTopicsRequest((topic,), 1000)


E = ErrorCode


def _produce_cases(target: Target) -> Iterator[Case]:
    batches = crafted_batches()
    valid = batches["valid"]
    for acks in (7, 2, -2, 32767, -32768):
        yield case(f"produce acks={acks}", _produce(valid, acks=acks), E.INVALID_REQUIRED_ACKS)
    bad_crc = _produce(batches["bad_crc"], acks=-1, timeout_ms=-1)
    yield case("produce acks=-1 timeout=-1, bad CRC", bad_crc, E.CORRUPT_MESSAGE)
    for p in (99, -1, INT32_MAX, INT32_MIN):
        body = _produce(valid, partition=p, timeout_ms=-1)
        yield case(f"produce to partition {p}", body, E.UNKNOWN_TOPIC_OR_PARTITION)
    absent = _produce(valid, topic=ABSENT_TOPIC)
    yield case("produce to an absent topic", absent, E.UNKNOWN_TOPIC_OR_PARTITION)
    nameless = _produce(valid, topic="")
    yield case(
        "produce to topic ''", nameless, E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_TOPIC_EXCEPTION
    )
    broken = {
        "bad_crc": E.CORRUPT_MESSAGE,
        "bad_magic": E.CORRUPT_MESSAGE,
        "base_offset_5": E.INVALID_RECORD,
        "count_mismatch": E.INVALID_RECORD,
        "zero_count": E.INVALID_RECORD,
        "codec_5": E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        "codec_7": E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        "length_negative": E.CORRUPT_MESSAGE,
        "length_huge": E.CORRUPT_MESSAGE,
        "truncated": E.CORRUPT_MESSAGE,
        "short": E.CORRUPT_MESSAGE,
        "empty": E.INVALID_RECORD,
        "valid_then_bad_crc": E.CORRUPT_MESSAGE,
    }
    for name, code in broken.items():
        yield case(f"produce batch {name}", _produce(batches[name]), code)
    big = build_batch([Record(b"x" * 1_100_000)], now_ms=1_700_000_000_000)
    yield case("produce over message.max.bytes", _produce(big), E.MESSAGE_TOO_LARGE)
    yield case("produce to a follower", _produce(valid), E.NOT_LEADER_OR_FOLLOWER, to_follower=True)


def _read_cases(target: Target) -> Iterator[Case]:
    follower = target.follower.broker_id
    for o in (-1, INT64_MIN, 1000, INT64_MAX):
        yield case(f"fetch offset {o}", _fetch(o), E.OFFSET_OUT_OF_RANGE)
    for p in (99, -1, INT32_MIN):
        yield case(f"fetch partition {p}", _fetch(partition=p), E.UNKNOWN_TOPIC_OR_PARTITION)
    future = _fetch(current_leader_epoch=10**6)
    yield case("fetch current_leader_epoch 10**6", future, E.UNKNOWN_LEADER_EPOCH)
    yield case("fetch current_leader_epoch -5", _fetch(current_leader_epoch=-5))
    yield case("fetch max_wait -1, min_bytes max", _fetch(max_wait_ms=-1, min_bytes=INT32_MAX))
    yield case("fetch max_bytes -1", _fetch(max_bytes=-1))
    yield case("fetch partition_max_bytes -1", _fetch(partition_max_bytes=-1))
    yield maybe("fetch isolation_level 7", _fetch(isolation_level=7), E.INVALID_REQUEST)
    yield case("fetch as replica 99 (no such broker)", _fetch(replica_id=99))
    as_follower = _fetch(-1, replica_id=follower)
    yield case("fetch as a follower, offset -1", as_follower, E.OFFSET_OUT_OF_RANGE)
    yield case("fetch topic ''", _fetch(topic=""), E.UNKNOWN_TOPIC_OR_PARTITION)
    yield case("fetch from a follower", _fetch(), E.NOT_LEADER_OR_FOLLOWER, to_follower=True)
    for t in (-4, INT64_MIN):
        yield case(f"list offsets timestamp {t}", _list_offsets(t), E.INVALID_REQUEST)
    yield case("list offsets timestamp max", _list_offsets(INT64_MAX))
    unknown = _list_offsets(partition=99)
    yield case("list offsets partition 99", unknown, E.UNKNOWN_TOPIC_OR_PARTITION)
    future_lo = _list_offsets(current_leader_epoch=10**6)
    yield case("list offsets current epoch 10**6", future_lo, E.UNKNOWN_LEADER_EPOCH)
    odd = _list_offsets(isolation_level=9)
    yield maybe("list offsets isolation_level 9", odd, E.INVALID_REQUEST)
    yield case("list offsets replica_id -7", _list_offsets(replica_id=-7))
    on_follower = _list_offsets()
    yield case(
        "list offsets on a follower", on_follower, E.NOT_LEADER_OR_FOLLOWER, to_follower=True
    )
    for epoch in (-5, INT32_MAX):
        for v in (0, 1):
            yield case(f"epoch end of {epoch}, v{v}", _offset_for_leader_epoch(epoch), version=v)
    epoch_99 = _offset_for_leader_epoch(partition=99)
    yield case("epoch end, partition 99", epoch_99, E.UNKNOWN_TOPIC_OR_PARTITION)
    epoch_future = _offset_for_leader_epoch(current_leader_epoch=10**6)
    yield case("epoch end, current epoch 10**6", epoch_future, E.UNKNOWN_LEADER_EPOCH)
    epoch_follower = _offset_for_leader_epoch()
    yield case(
        "epoch end on a follower", epoch_follower, E.NOT_LEADER_OR_FOLLOWER, to_follower=True
    )
    odd_names = MetadataRequest(("", ".", "..", "x" * 250, "a/b", ABSENT_TOPIC), True)
    for v in (0, 1):
        yield case(
            f"metadata v{v}, odd names, auto-create",
            odd_names,
            E.UNKNOWN_TOPIC_OR_PARTITION,
            E.INVALID_TOPIC_EXCEPTION,
            version=v,
        )
    yield case("metadata for no topic", MetadataRequest(()))


def _controller_request_cases(target: Target) -> Iterator[Case]:
    """Orders meant for brokers, from a client, with a stale controller or broker epoch."""
    body: object
    follower, epoch = target.follower.broker_id, target.facts.controller_epoch
    state = LeaderAndIsrPartitionState(
        TOPIC, 0, epoch, follower, INT32_MAX, (follower,), INT32_MAX, (follower,)
    )
    stop = (StopReplicaTopicState(TOPIC, (StopReplicaPartitionState(0, -2, True),)),)
    for ce in (epoch - 1, INT32_MIN):
        for v in (0, 1):
            body = LeaderAndIsrRequest(follower, ce, -1, (state,), ())
            yield case(
                f"leader and isr v{v}, epoch {ce}", body, E.STALE_CONTROLLER_EPOCH, version=v
            )
        body = StopReplicaRequest(follower, ce, -1, stop)
        yield case(f"stop replica (delete), epoch {ce}", body, E.STALE_CONTROLLER_EPOCH)
        body = UpdateMetadataRequest(follower, ce, -1, (), (), (TOPIC,))
        yield case(f"update metadata (empty), epoch {ce}", body, E.STALE_CONTROLLER_EPOCH)
    for be in (0, -2, INT64_MIN, target.broker_epoch - 1):
        body = LeaderAndIsrRequest(follower, epoch, be, (state,), ())
        yield case(f"leader and isr, broker epoch {be}", body, E.STALE_BROKER_EPOCH)
        body = StopReplicaRequest(follower, epoch, be, stop)
        yield case(f"stop replica (delete), broker epoch {be}", body, E.STALE_BROKER_EPOCH)
        body = UpdateMetadataRequest(follower, epoch, be, (), (), (TOPIC,))
        yield case(f"update metadata (empty), broker epoch {be}", body, E.STALE_BROKER_EPOCH)
    for b in (99, INT32_MIN, -1):
        body = ControlledShutdownRequest(b, 0)
        yield case(f"controlled shutdown of broker {b}", body, E.BROKER_NOT_AVAILABLE)
    for be in (0, -2, INT64_MIN):
        body = ControlledShutdownRequest(follower, be)
        yield case(f"controlled shutdown, broker epoch {be}", body, E.STALE_BROKER_EPOCH)
    body = ControlledShutdownRequest(target.leader.broker_id, -1)
    yield case("controlled shutdown at a non-controller", body, E.NOT_CONTROLLER, to_follower=True)


def _topic_admin_cases(target: Target) -> Iterator[Case]:
    body: object
    leader = target.leader.broker_id
    for n in (-5, 0, 10_001, INT32_MAX):
        yield case(f"create topics, {n} partitions", _create(partitions=n), E.INVALID_PARTITIONS)
    for rf in (0, -5, 4, 32767):
        body = _create(rf=rf)
        yield case(f"create topics, replication factor {rf}", body, E.INVALID_REPLICATION_FACTOR)
    for name in ("", ".", "..", "x" * 250, "a/b", "with space", "ünïcödé"):
        yield case(f"create topic {name[:12]!r}", _create(name), E.INVALID_TOPIC_EXCEPTION)
    one = (CreatableReplicaAssignment(0, (leader,)),)
    both = _create(partitions=3, rf=-1, assignments=one)
    yield case("create topics, assignments and a count", both, E.INVALID_REQUEST)
    bad_assignments: list[tuple[int, tuple[int, ...]]] = [
        (0, (99,)),
        (0, (leader, leader)),
        (1, (leader,)),
        (0, ()),
    ]
    for index, replicas in bad_assignments:
        assigned = (CreatableReplicaAssignment(index, replicas),)
        body = _create(partitions=-1, rf=-1, assignments=assigned)
        yield case(f"create topics, {index} on {replicas}", body, E.INVALID_REPLICA_ASSIGNMENT)
    bad_configs: list[tuple[str, str | None]] = [
        ("no.such.config", "1"),
        ("min.insync.replicas", "-1"),
        ("retention.ms", None),
        ("cleanup.policy", "shred"),
    ]
    for key, value in bad_configs:
        body = _create(configs=(CreatableTopicConfig(key, value),))
        yield case(f"create topics, {key}={value}", body, E.INVALID_CONFIG)
    yield case("create the existing topic", _create(TOPIC), E.TOPIC_ALREADY_EXISTS)
    twice = CreateTopicsRequest((CreatableTopic("fuzz-new", 1, 1),) * 2, 1000, True)
    yield case("create topics naming one twice (validate only)", twice, E.INVALID_REQUEST)
    bad_name = _create("")
    yield case(
        "create topics at a non-controller", bad_name, E.INVALID_TOPIC_EXCEPTION, to_follower=True
    )
    for names in [(ABSENT_TOPIC,), ("",), (ABSENT_TOPIC, ABSENT_TOPIC)]:
        body = DeleteTopicsRequest(names, -1)
        yield case(f"delete topics {names}, timeout -1", body, E.UNKNOWN_TOPIC_OR_PARTITION)
    transactional = InitProducerIdRequest(-1, "tx")
    yield case("init producer id, transactional", transactional, E.INVALID_REQUEST)
    yield case("init producer id, id -5 epoch -7", InitProducerIdRequest(-1, None, -5, -7))
    for n in (1, 0, -1, INT32_MAX):
        body = CreatePartitionsRequest((CreatePartitionsTopic(TOPIC, n),), -1)
        yield case(f"create partitions, count {n}", body, E.INVALID_PARTITIONS)
    absent = CreatePartitionsRequest((CreatePartitionsTopic(ABSENT_TOPIC, 2),), 1000)
    yield case("create partitions, absent topic", absent, E.UNKNOWN_TOPIC_OR_PARTITION)
    bad_growths: list[tuple[int, list[tuple[int, ...]]]] = [
        (2, [(99, 98, 97)]),
        (3, [(1, 2, 3)]),
        (2, [(1, 1, 2)]),
        (2, [(1,)]),
    ]
    for count, replicas_list in bad_growths:
        assignments = tuple(CreatePartitionsAssignment(r) for r in replicas_list)
        topic = CreatePartitionsTopic(TOPIC, count, assignments)
        body = CreatePartitionsRequest((topic,), 1000, True)
        yield case(
            f"create partitions, {count}: {replicas_list}", body, E.INVALID_REPLICA_ASSIGNMENT
        )
    twice_p = CreatePartitionsRequest((CreatePartitionsTopic(ABSENT_TOPIC, 2),) * 2, 1000, True)
    yield case(
        "create partitions naming one twice",
        twice_p,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.INVALID_REQUEST,
    )


def _controller_admin_cases(target: Target) -> Iterator[Case]:
    leader = target.leader.broker_id
    absent = (TopicPartitions(ABSENT_TOPIC, (0,)),)
    for t in (7, -1):
        yield case(
            f"elect leaders, type {t}", ElectLeadersRequest(t, absent, 1000), E.INVALID_REQUEST
        )
    odd = ElectLeadersRequest(0, (TopicPartitions(TOPIC, (99, -1)),), 1000)
    yield case("elect leaders, partitions 99 and -1", odd, E.UNKNOWN_TOPIC_OR_PARTITION)
    hurried = ElectLeadersRequest(1, absent, -1)
    yield case(
        "elect leaders (unclean), timeout -1",
        hurried,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.REQUEST_TIMED_OUT,
    )
    elsewhere = ElectLeadersRequest(0, absent, 1000)
    yield case("elect leaders at a non-controller", elsewhere, E.NOT_CONTROLLER, to_follower=True)
    moves: list[tuple[str, int, tuple[int, ...] | None, ErrorCode]] = [
        (TOPIC, 0, (), E.INVALID_REPLICA_ASSIGNMENT),
        (TOPIC, 0, (99,), E.INVALID_REPLICA_ASSIGNMENT),
        (TOPIC, 0, (leader, leader), E.INVALID_REPLICA_ASSIGNMENT),
        (TOPIC, 99, (leader,), E.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, -1, (leader,), E.UNKNOWN_TOPIC_OR_PARTITION),
        (ABSENT_TOPIC, 0, (leader,), E.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, 0, None, E.NO_REASSIGNMENT_IN_PROGRESS),
    ]
    for topic, index, replicas, code in moves:
        body = _reassign(topic, index, replicas)
        for v in (0, 1):
            yield case(f"reassign {topic}-{index} to {replicas}, v{v}", body, code, version=v)
    for throttle in (0, -5, INT64_MIN):
        body = _reassign(TOPIC, 0, (99,), throttle)
        yield case(f"reassign with throttle {throttle}", body, E.INVALID_REQUEST, version=1)
    away = _reassign(TOPIC, 0, (99,))
    yield case("reassign at a non-controller", away, E.NOT_CONTROLLER, to_follower=True)
    wanted = (ListPartitionReassignmentsTopics(TOPIC, (-1, 99)),)
    yield case("list reassignments -1 and 99", ListPartitionReassignmentsRequest(-1, wanted))
    anywhere = ListPartitionReassignmentsRequest(1000)
    yield case(
        "list reassignments at a non-controller", anywhere, E.NOT_CONTROLLER, to_follower=True
    )


def _reassign(
    topic: str, index: int, replicas: tuple[int, ...] | None, throttle: int = -1
) -> AlterPartitionReassignmentsRequest:
    partitions = (ReassignablePartition(index, replicas),)
    return AlterPartitionReassignmentsRequest(
        1000, (ReassignableTopic(topic, partitions),), throttle
    )


def nonsense_cases(target: Target) -> list[Case]:
    """Valid frames whose values make no sense, with the errors docs/protocol.md gives."""
    return [
        *_produce_cases(target),
        *_read_cases(target),
        *_controller_request_cases(target),
        *_topic_admin_cases(target),
        *_controller_admin_cases(target),
    ]


def _closing_frames() -> list[tuple[str, bytes]]:
    """Frames that decode as msgpack but name no API or version the broker has: closed."""

    def raw(api_key: int, version: int, body: Any) -> bytes:
        header = {
            "api_key": api_key,
            "api_version": version,
            "correlation_id": 1,
            "client_id": None,
        }
        return frame(msgpack.packb([header, body], use_bin_type=True))

    return [
        *((f"api key {k}", raw(k, 0, {})) for k in (99, -1, 9, 32767, -32768)),
        *(
            (f"metadata v{v}", raw(3, v, {"topics": None, "allow_auto_topic_creation": False}))
            for v in (-1, 2, 32767)
        ),
        ("produce v1", raw(0, 1, {})),
    ]


async def test_nonsense_values_get_the_documented_errors(target: Target) -> None:
    mismatches = []
    cases = nonsense_cases(target)
    for i, c in enumerate(cases):
        broker = target.follower if c.to_follower else target.leader
        data = request_frame(c.body, c.version, correlation_id=INT32_MIN + i)
        expected = expected_outcome(data)
        assert len(expected.answered) == 1, c.name
        reply = await exchange(broker.port, data, send_eof=True, timeout_s=EXCHANGE_TIMEOUT_S)
        (response,) = check_reply(expected, reply)
        got = {ErrorCode(code) for code in error_codes(response.body) if code}
        ok = got <= c.codes and (bool(got) or not c.required or not c.codes)
        if not ok or reply.elapsed_s > 3:
            mismatches.append(
                f"{c.name}: got {sorted(got)} in {reply.elapsed_s:.1f}s, "
                f"want {sorted(c.codes)}: {response.body!r:.300}"
            )
    # acks=0: no answer at all, not even an error; the probe after it is answered.
    silent = request_frame(_produce(crafted_batches()["bad_crc"], acks=0), correlation_id=1)
    probe = request_frame(ApiVersionsRequest(), correlation_id=2)
    expected = expected_outcome(silent + probe)
    reply = await exchange(target.leader.port, silent + probe, send_eof=True, timeout_s=10)
    (answer,) = check_reply(expected, reply)
    assert isinstance(answer.body, ApiVersionsResponse) and answer.header.correlation_id == 2
    closing = _closing_frames()
    for name, data in closing:
        expected = expected_outcome(data)
        assert expected.bad_frame is not None and not expected.api_versions_fallback, name
        reply = await exchange(target.leader.port, data, send_eof=False, timeout_s=10)
        if reply.frames:
            mismatches.append(f"{name}: answered, want the connection closed")
    print(
        f"\nnonsense values: {len(cases) + 1 + len(closing)} requests, all as documented"
        if not mismatches
        else ""
    )
    assert not mismatches, "\n".join(mismatches)
    await assert_unharmed(target, "nonsense values table")


# -- known bugs ---------------------------------------------------------------------------


async def test_api_versions_at_an_unsupported_version_is_answered_with_error_35(
    target: Target,
) -> None:
    for version in (1, -1, 32767):
        header = {"api_key": 18, "api_version": version, "correlation_id": 5, "client_id": None}
        data = frame(msgpack.packb([header, {}], use_bin_type=True))
        reply = await exchange(target.leader.port, data, send_eof=True, timeout_s=10)
        assert len(reply.frames) == 1, f"v{version}: closed without an answer"
        response = decode_response(reply.frames[0], ApiKey.API_VERSIONS, 0)
        assert response.header.correlation_id == 5
        assert response.body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert len(response.body.api_keys) == len(APIS)


EXIT_GRACE_S: Final = 1.0
LONG_NAME: Final = "x" * 32760  # within the 32767-byte limit; quoted in a message, beyond it


@pytest.fixture
def lone_broker(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A 1-broker cluster of its own, for inputs that stop a broker."""
    cluster = Cluster(zookeeper.port, tmp_path, 1, FAST_REPLICATION)
    cluster.start()
    try:
        prepare_cluster(cluster)
        yield cluster.brokers[1]
    finally:
        cluster.stop()


UNKNOWN_BROKERS: Final = tuple(range(1000, 11_000))  # quoted: "brokers [1000, ...] are not live"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_produce(crafted_batches()["valid"], topic=LONG_NAME), E.UNKNOWN_TOPIC_OR_PARTITION),
        (DeleteTopicsRequest((LONG_NAME,), 1000), E.UNKNOWN_TOPIC_OR_PARTITION),
        (
            CreatePartitionsRequest((CreatePartitionsTopic(LONG_NAME, 2),), 1000),
            E.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (_create(configs=(CreatableTopicConfig(LONG_NAME, "1"),)), E.INVALID_CONFIG),
        (_create(configs=(CreatableTopicConfig("retention.ms", LONG_NAME),)), E.INVALID_CONFIG),
        (
            _create(
                partitions=-1, rf=-1, assignments=(CreatableReplicaAssignment(0, UNKNOWN_BROKERS),)
            ),
            E.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
    ids=[
        "produce-topic",
        "delete-topics-name",
        "create-partitions-topic",
        "create-topics-config-name",
        "create-topics-config-value",
        "create-topics-10000-unknown-brokers",
    ],
)
def test_an_error_message_quoting_long_input_does_not_stop_the_broker(
    lone_broker: BrokerProcess, body: object, code: ErrorCode
) -> None:
    data = request_frame(body)
    reply = trio.run(partial(exchange, lone_broker.port, data, send_eof=True, timeout_s=10))
    process = lone_broker.process
    assert process is not None
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(EXIT_GRACE_S)  # a broker that failed takes a moment to exit
    assert process.poll() is None, f"the broker exited with status {process.poll()}"
    (response,) = check_reply(expected_outcome(data), reply)
    assert set(error_codes(response.body)) - {0} == {code}
    assert trio.run(fetch_metadata, lone_broker.port) is not None


async def test_create_partitions_of_an_illegal_topic_name_is_answered(target: Target) -> None:
    unanswered = []
    for name in ("", ".", "..", "/", f"{TOPIC}/partitions"):
        body = CreatePartitionsRequest((CreatePartitionsTopic(name, 2),), 1000, True)
        data = request_frame(body)
        reply = await exchange(target.leader.port, data, send_eof=True, timeout_s=10)
        if not reply.frames:
            unanswered.append(name)
            continue
        (response,) = check_reply(expected_outcome(data), reply)
        codes = set(error_codes(response.body))
        assert codes <= {E.INVALID_TOPIC_EXCEPTION, E.UNKNOWN_TOPIC_OR_PARTITION}, (name, codes)
    assert not unanswered, f"connection closed without an answer for {unanswered}"
