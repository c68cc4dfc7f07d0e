"""ClusterMetadata: bootstrap parsing, refresh merge rules, connection pooling."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import trio

from client.errors import HighwaterClientError, HighwaterTimeoutError, NoBrokersAvailable
from client.metadata import ClusterMetadata, parse_bootstrap
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.metadata import (
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from tests.unit.client.fake_broker import FakeCluster


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,c") == [("a", 1), ("b", 2), ("c", 9092)]
    assert parse_bootstrap(["[::1]:9093"]) == [("::1", 9093)]
    for bad in ("", "a:x", "a:0", ":5"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def response(leader: int, leader_epoch: int, controller_epoch: int) -> MetadataResponse:
    return MetadataResponse(
        brokers=(BrokerEndpoint(1, "h", 1), BrokerEndpoint(2, "h", 2)),
        cluster_id="c",
        controller_id=leader,
        topics=(
            MetadataTopic(0, "t", (MetadataPartition(0, 0, leader, leader_epoch, (1, 2), (1, 2)),)),
        ),
        controller_epoch=controller_epoch,
    )


async def test_stale_answers_do_not_move_leaders_or_controller_backwards() -> None:
    metadata = ClusterMetadata("h:1")
    metadata._merge(response(leader=2, leader_epoch=5, controller_epoch=3), ("t",))
    assert metadata.leader_for("t", 0) == 2
    metadata._merge(response(leader=1, leader_epoch=4, controller_epoch=2), ("t",))
    assert metadata.leader_for("t", 0) == 2
    assert (metadata.controller_id, metadata.controller_epoch) == (2, 3)
    metadata._merge(response(leader=1, leader_epoch=6, controller_epoch=4), ("t",))
    assert metadata.leader_for("t", 0) == 1
    assert metadata.controller_epoch == 4


async def test_a_broker_behind_the_controller_does_not_make_topics_forgotten() -> None:
    """A restarted broker answers before the controller has told it anything: its "unknown
    topic" must not drop the leader epochs we know, or a deposed leader's stale answer (an
    older epoch) would be believed next."""
    metadata = ClusterMetadata("h:1")
    metadata._merge(response(leader=2, leader_epoch=5, controller_epoch=3), ("t",))
    restarted = MetadataResponse(
        brokers=(BrokerEndpoint(1, "h", 1),),
        cluster_id="c",
        controller_id=-1,
        topics=(MetadataTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "t", ()),),
        controller_epoch=-1,
    )
    metadata._merge(restarted, ("t",))
    metadata._merge(replace(restarted, topics=()), None)
    assert metadata.leader_for("t", 0) == 2
    assert metadata.topic_error("t") == 0
    metadata._merge(response(leader=1, leader_epoch=4, controller_epoch=3), ("t",))
    assert metadata.leader_for("t", 0) == 2  # the deposed leader's answer stays stale
    # From a broker up to date with the controller, "unknown" is news: the topic is gone.
    metadata._merge(replace(restarted, controller_epoch=3), ("t",))
    assert metadata.leader_for("t", 0) is None
    assert metadata.topic_error("t") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_refresh_pools_one_connection_per_broker(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 3)
    metadata = ClusterMetadata(cluster3.bootstrap)
    try:
        metadata.add_topics(["t"])
        await metadata.refresh()
        assert metadata.partitions_for("t") == (0, 1, 2)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert [metadata.leader_for("t", p) for p in range(3)] == [1, 2, 3]
        first = await metadata.connection(2)
        assert await metadata.connection(2) is first
    finally:
        await metadata.aclose()


async def test_a_broker_that_timed_out_is_asked_last(cluster3: FakeCluster) -> None:
    """A leader cut off from ZooKeeper but not from its clients answers Metadata at once,
    naming itself leader: after a request to it timed out, the next refresh asks the others
    first, even when it is the only broker connected (asymmetric partition (b) in
    docs/reliability.md)."""
    cluster3.create_topic("t", 3)
    metadata = ClusterMetadata(cluster3.bootstrap)
    try:
        metadata.add_topics(["t"])
        await metadata.refresh()
        suspect = metadata.brokers[1]
        assert metadata._refresh_candidates()[0] == (suspect.host, suspect.port)  # connected
        metadata.request_update(suspect=1)
        assert metadata._refresh_candidates()[-1] == (suspect.host, suspect.port)
        await metadata.refresh()
        assert metadata._suspect is None  # an answer clears it
    finally:
        await metadata.aclose()


async def test_a_hung_broker_first_in_the_bootstrap_list_costs_one_attempt_timeout(
    cluster3: FakeCluster,
) -> None:
    """A broker that accepts the connection and reads the request but never answers (a stopped
    process) holds a refresh up for metadata_attempt_timeout_ms, not request.timeout.ms; the
    next refresh asks it last and does not wait for it at all."""
    cluster3.stalled.add((1, ApiKey.METADATA))
    metadata = ClusterMetadata(
        cluster3.bootstrap, request_timeout_ms=60_000, metadata_attempt_timeout_ms=300
    )
    try:
        with trio.fail_after(10):
            started = trio.current_time()
            await metadata.refresh(all_topics=True)
            first_s = trio.current_time() - started
            started = trio.current_time()
            await metadata.refresh(all_topics=True)
            second_s = trio.current_time() - started
        hung = metadata.brokers[1]
        assert metadata._refresh_candidates()[-1] == (hung.host, hung.port)
    finally:
        await metadata.aclose()
    assert 0.3 <= first_s < 5, first_s
    assert second_s < 0.3, second_s
    asked = [b for b, body in cluster3.requests if isinstance(body, MetadataRequest)]
    assert asked.count(1) == 1 and len(asked) == 3, asked


async def test_a_slow_cluster_still_answers_a_refresh(cluster3: FakeCluster) -> None:
    """Every broker slower than metadata_attempt_timeout_ms: each is asked in turn and the
    first answer still counts (a silent broker's request is not given up)."""
    cluster3.delay_ms[ApiKey.METADATA] = 400
    metadata = ClusterMetadata(cluster3.bootstrap, metadata_attempt_timeout_ms=150)
    try:
        with trio.fail_after(10):
            await metadata.refresh(all_topics=True)
        assert sorted(metadata.brokers) == [1, 2, 3]
    finally:
        await metadata.aclose()
    asked = [b for b, body in cluster3.requests if isinstance(body, MetadataRequest)]
    assert asked[0] == 1 and len(asked) >= 2, asked


async def test_any_connection_avoids_a_hung_bootstrap_broker(cluster3: FakeCluster) -> None:
    """Before any metadata, the first bootstrap address would do, and a hung broker would take
    the request (InitProducerId, FindCoordinator) and never answer: a refresh comes first."""
    cluster3.stalled.add((1, ApiKey.METADATA))
    metadata = ClusterMetadata(cluster3.bootstrap, metadata_attempt_timeout_ms=300)
    try:
        with trio.fail_after(10):
            conn = await metadata.any_connection()
        assert conn.address != f"127.0.0.1:{cluster3.ports[1]}"
    finally:
        await metadata.aclose()


async def test_ask_any_goes_past_a_hung_preferred_broker(cluster3: FakeCluster) -> None:
    """A read any broker answers (DescribeConfigs of a topic) prefers the controller; a hung
    one costs metadata_attempt_timeout_ms, then is not preferred again."""
    metadata = ClusterMetadata(cluster3.bootstrap, metadata_attempt_timeout_ms=300)
    try:
        await metadata.refresh(all_topics=True)
        cluster3.stalled.add((1, ApiKey.METADATA))
        with trio.fail_after(10):
            started = trio.current_time()
            answer = await metadata.ask_any(MetadataRequest(topics=None), prefer=1)
            first_s = trio.current_time() - started
            started = trio.current_time()
            await metadata.ask_any(MetadataRequest(topics=None), prefer=1)
            second_s = trio.current_time() - started
    finally:
        await metadata.aclose()
    assert isinstance(answer, MetadataResponse)
    assert 0.3 <= first_s < 5, first_s
    assert second_s < 0.3, second_s


async def test_bootstrap_skips_dead_addresses(cluster: FakeCluster) -> None:
    metadata = ClusterMetadata(f"127.0.0.1:1,{cluster.bootstrap}", retry_backoff_ms=1)
    try:
        await metadata.refresh(all_topics=True)
        assert list(metadata.brokers) == [1]
    finally:
        await metadata.aclose()


async def test_no_brokers_available() -> None:
    metadata = ClusterMetadata("127.0.0.1:1")
    try:
        with pytest.raises(NoBrokersAvailable):
            await metadata.refresh()
    finally:
        await metadata.aclose()


async def test_wait_for_topic_keeps_its_timeout_when_a_broker_never_answers(
    cluster: FakeCluster,
) -> None:
    """A refresh under way at the deadline is abandoned (not left to request_timeout_ms)."""
    cluster.stalled.add((1, ApiKey.METADATA))
    metadata = ClusterMetadata(cluster.bootstrap, request_timeout_ms=60_000)
    try:
        with trio.fail_after(30), pytest.raises(HighwaterTimeoutError) as info:
            await metadata.wait_for_topic("t", 200)
    finally:
        await metadata.aclose()
    assert "no broker answered" in str(info.value)
    assert metadata.last_answer_ms == -math.inf


async def test_wait_for_topic_fails_at_once_on_topic_authorization_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Kafka's producer: no DESCRIBE on the topic is not worth waiting max_block_ms for."""
    metadata = ClusterMetadata("h:1", retry_backoff_ms=1)
    refreshes = 0

    async def refresh(*args: object, **kwargs: object) -> MetadataResponse:
        nonlocal refreshes
        refreshes += 1
        answer = MetadataResponse(
            brokers=(BrokerEndpoint(1, "h", 1),),
            cluster_id="c",
            controller_id=1,
            topics=(MetadataTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "t", ()),),
        )
        metadata._merge(answer, ("t",))
        return answer

    monkeypatch.setattr(metadata, "refresh", refresh)
    with trio.fail_after(5), pytest.raises(HighwaterClientError) as info:
        await metadata.wait_for_topic("t", 60_000)
    assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert str(info.value).startswith("TOPIC_AUTHORIZATION_FAILED: topic 't'")
    assert refreshes == 1
