"""The metrics: figures read at scrape time from the broker's state, the per-request figures,
the text format (parsed back with prometheus-client's own parser) and their documentation.

A real ReplicaManager and logs in tmp_path; the server is built, not run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.config.broker_config import BrokerConfig
from broker.config.log_config import LogConfig
from broker.context import BrokerContext
from broker.core.client_quotas import DEFAULT_ENTITY, QuotaEntity
from broker.core.isr import IsrWrite
from broker.core.principal import Principal
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager
from broker.metrics import MAX_QUOTA_SERIES, GroupLag, api_name, new_registry
from broker.purgatory import Purgatory, RequestClock, current_request_clock
from broker.request_stats import RequestStats, count_errors
from broker.server import BrokerServer
from controller.zk_data import PartitionStateZnode
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.messages.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from protocol.records import Record, build_batch
from protocol.stats import Timings
from protocol.topic_partition import TopicPartition

ME = 1
NOW = 1_700_000_000_000
OPERATIONS_MD = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def leader_state(
    topic: str, partition: int, isr: tuple[int, ...], replicas: tuple[int, ...]
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic_name=topic,
        partition_index=partition,
        controller_epoch=1,
        leader=ME,
        leader_epoch=0,
        isr=isr,
        partition_epoch=0,
        replicas=replicas,
    )


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(NOW)
    config = BrokerConfig(broker_id=ME, zookeeper_connect="127.0.0.1:2181", min_insync_replicas=2)
    context = BrokerContext(config, ReplicaManager(ME, manager))
    yield context
    manager.shutdown(NOW)


def scrape(ctx: BrokerContext, server: BrokerServer | None = None) -> dict[str, list]:  # type: ignore[type-arg]
    server = server or BrokerServer(ctx, "127.0.0.1", 0, 1 << 20, request_stats=RequestStats())
    registry, _ = new_registry(ctx, server)
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    for sample in samples:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def test_replica_manager_figures_follow_the_partitions(ctx: BrokerContext) -> None:
    rm = ctx.replica_manager
    rm.become_leader_or_follower(
        (
            leader_state("a", 0, (1, 2, 3), (1, 2, 3)),  # in sync
            leader_state("a", 1, (1, 2), (1, 2, 3)),  # under-replicated, at min ISR
            leader_state("b", 0, (1,), (1, 2, 3)),  # under-replicated, under min ISR
        ),
        NOW,
        wall_ms=NOW,
    )
    batch = build_batch([Record(b"v" * 10, b"k")] * 5, now_ms=NOW)
    assert rm.append(TopicPartition("a", 0), batch, NOW).error_code == ErrorCode.NONE
    families = scrape(ctx)
    rmx = "highwater_replica_manager_"
    assert (
        value(families[rmx + "under_replicated_partitions"], rmx + "under_replicated_partitions")
        == 2
    )
    assert value(families[rmx + "under_min_isr_partitions"], rmx + "under_min_isr_partitions") == 1
    assert value(families[rmx + "at_min_isr_partitions"], rmx + "at_min_isr_partitions") == 1
    assert value(families[rmx + "leader_count"], rmx + "leader_count") == 3
    leo = families["highwater_log_end_offset"]
    assert value(leo, "highwater_log_end_offset", topic="a", partition="0") == 5
    assert value(leo, "highwater_log_end_offset", topic="b", partition="0") == 0
    start = families["highwater_log_start_offset"]
    assert value(start, "highwater_log_start_offset", topic="a", partition="0") == 0
    under = families["highwater_partition_under_replicated"]
    assert value(under, "highwater_partition_under_replicated", topic="a", partition="1") == 1
    records_in = families["highwater_broker_topic_records_in"]
    assert value(records_in, "highwater_broker_topic_records_in_total", topic="a") == 5
    assert value(
        families["highwater_log_size_bytes"], "highwater_log_size_bytes", topic="a", partition="0"
    ) == len(batch)


def test_isr_outcomes_are_counted_by_the_core(ctx: BrokerContext) -> None:
    rm = ctx.replica_manager
    rm.become_leader_or_follower((leader_state("a", 0, (1, 2, 3), (1, 2, 3)),), NOW, wall_ms=NOW)
    partition = rm.partitions[TopicPartition("a", 0)]
    isr = ctx.state.isr
    [write] = isr.shrink([partition], NOW + 60_000)  # followers never fetched
    isr.written(write, partition, 1, NOW + 60_000)
    assert partition.isr == (ME,)
    assert (isr.isr_shrinks, isr.isr_expands, isr.failed_isr_updates) == (1, 0, 0)
    lost = IsrWrite(write.tp, PartitionStateZnode(ME, 0, (1, 2), 1), 1)
    partition.begin_isr_update((1, 2))
    isr.written(lost, partition, None, NOW)
    assert isr.failed_isr_updates == 1
    families = scrape(ctx)
    assert (
        value(
            families["highwater_replica_manager_isr_shrinks"],
            "highwater_replica_manager_isr_shrinks_total",
        )
        == 1
    )
    assert (
        value(
            families["highwater_replica_manager_failed_isr_updates"],
            "highwater_replica_manager_failed_isr_updates_total",
        )
        == 1
    )


def test_request_figures_and_error_counts(ctx: BrokerContext) -> None:
    stats = RequestStats()
    server = BrokerServer(ctx, "127.0.0.1", 0, 1 << 20, request_stats=stats)
    response = ProduceResponse(
        (
            ProduceTopicResponse(
                "a",
                (
                    ProducePartitionResponse(0, ErrorCode.NONE),
                    ProducePartitionResponse(1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                ),
            ),
        )
    )
    for _ in range(3):
        stats.record(ApiKey.PRODUCE, 0.0001, 0.002, 0.5, 0.0002, 100, 40, response)
    stats.record(ApiKey.METADATA, 0.0001, 0.001, 0.0, 0.0001, 30, 200, None)
    families = scrape(ctx, server)
    requests = families["highwater_network_requests"]
    assert value(requests, "highwater_network_requests_total", request="Produce") == 3
    assert value(requests, "highwater_network_requests_total", request="Metadata") == 1
    errors = families["highwater_network_errors"]
    assert value(errors, "highwater_network_errors_total", request="Produce", error="NONE") == 3
    assert (
        value(
            errors,
            "highwater_network_errors_total",
            request="Produce",
            error="NOT_LEADER_OR_FOLLOWER",
        )
        == 3
    )
    remote = families["highwater_network_request_remote_time_seconds"]
    assert (
        value(remote, "highwater_network_request_remote_time_seconds_count", request="Produce") == 3
    )
    assert (
        value(
            remote,
            "highwater_network_request_remote_time_seconds_bucket",
            request="Produce",
            le="0.25",
        )
        == 0
    )
    assert (
        value(
            remote,
            "highwater_network_request_remote_time_seconds_bucket",
            request="Produce",
            le="0.5",
        )
        == 3
    )
    total = families["highwater_network_request_total_time_seconds"]
    assert value(
        total, "highwater_network_request_total_time_seconds_sum", request="Produce"
    ) == pytest.approx(3 * 0.5023)
    assert (
        value(
            families["highwater_network_request_bytes"],
            "highwater_network_request_bytes_total",
            request="Produce",
        )
        == 300
    )


def test_count_errors_walks_nested_responses() -> None:
    errors: dict[int, int] = {}
    count_errors(ProduceResponse(()), errors)
    assert errors == {}
    count_errors(
        ProduceResponse((ProduceTopicResponse("a", (ProducePartitionResponse(0, 6),)),)), errors
    )
    assert errors == {6: 1}


def test_api_names_are_kafkas() -> None:
    assert api_name(ApiKey.LEADER_AND_ISR) == "LeaderAndIsr"
    assert api_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert api_name(999) == "999"


def test_timings_buckets_are_cumulative() -> None:
    timings = Timings((0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 2.0):
        timings.observe(seconds)
    assert timings.cumulative() == [(0.1, 2), (1.0, 3), (float("inf"), 4)]
    assert timings.count == 4 and timings.sum == pytest.approx(2.65)


async def test_time_in_the_purgatory_is_the_requests_remote_time() -> None:
    purgatory = Purgatory()
    clock = RequestClock()
    current_request_clock.set(clock)

    async def waiter() -> None:
        assert await purgatory.wait(["k"], trio.current_time() + 10, "produce")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.waiting["produce"] == 1
        await trio.sleep(0.05)  # time parked, for the remote time below (not a synchronisation)
        purgatory.notify("k")
    assert purgatory.waiting["produce"] == 0
    assert clock.remote_s >= 0.04


def test_the_process_and_python_families_are_exposed(ctx: BrokerContext) -> None:
    """prometheus-client's standard collectors, as every Prometheus target has them."""
    families = scrape(ctx)
    rss = value(families["process_resident_memory_bytes"], "process_resident_memory_bytes")
    assert rss > 1 << 20  # this Python process holds more than 1 MiB
    assert value(families["process_open_fds"], "process_open_fds") > 0
    assert value(families["process_cpu_seconds"], "process_cpu_seconds_total") > 0
    assert "python_gc_collections" in families
    assert "python_info" in families


def test_group_lag_hook_feeds_the_family(ctx: BrokerContext) -> None:
    server = BrokerServer(ctx, "127.0.0.1", 0, 1 << 20)
    registry, collector = new_registry(ctx, server)
    assert "highwater_consumer_group_lag{" not in generate_latest(registry).decode()
    collector.group_lag = lambda: [GroupLag("g", "a", 0, 42)]
    families = {
        f.name: f.samples
        for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    assert (
        value(families["highwater_consumer_group_lag"], "highwater_consumer_group_lag", group="g")
        == 42
    )


def test_every_metric_is_documented(ctx: BrokerContext) -> None:
    """docs/operations.md's metrics table lists every family as exposed, with its Kafka name."""
    ctx.replica_manager.become_leader_or_follower(
        (leader_state("a", 0, (1,), (1,)),), NOW, wall_ms=NOW
    )
    server = BrokerServer(ctx, "127.0.0.1", 0, 1 << 20, request_stats=RequestStats())
    registry, _ = new_registry(ctx, server)
    exposition = generate_latest(registry).decode()
    exposed = set(re.findall(r"^# TYPE (highwater_\S+) ", exposition, flags=re.MULTILINE))
    standard = set(re.findall(r"^# TYPE ((?!highwater_)\S+) ", exposition, flags=re.MULTILINE))
    assert {n.split("_", 1)[0] for n in standard} == {"process", "python"}
    exposed |= {"highwater_http_connections", "highwater_http_connections_closed_by_limit_total"}
    text = OPERATIONS_MD.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(highwater_[a-z_]+)`", text, flags=re.MULTILINE))
    assert exposed - documented == set(), "document these in docs/operations.md"
    assert documented - exposed == set(), "no longer exposed"
    assert "`process_*`" in text and "`python_*`" in text  # the standard families, in one line


def test_every_apis_response_has_an_error_walker() -> None:
    """Generated once per response type from its fields (broker/request_stats.py)."""
    from protocol.apis import APIS
    from protocol.messages.fetch import FetchPartitionData, FetchResponse, FetchTopicResponse

    for spec in APIS.values():
        assert callable(_walker_for(spec.response))
    errors: dict[int, int] = {}
    fetch = FetchResponse(
        ErrorCode.NONE,
        (
            FetchTopicResponse(
                "a", (FetchPartitionData(0, 1, 0, 0, b""), FetchPartitionData(1, 0, 0, 0, b""))
            ),
        ),
    )
    count_errors(fetch, errors)
    assert errors == {0: 2, 1: 1}


def _walker_for(cls: type) -> object:
    from broker.request_stats import _compile

    return _compile(cls)


def test_client_quota_figures_are_per_client(ctx: BrokerContext) -> None:
    produce = QuotaEntity(None, "app")
    ctx.client_quotas.update({produce: {"producer_byte_rate": 100.0}})
    now_ms = ctx.now_ms()
    request = ProduceRequest(
        1, 1000, (ProduceTopicData("a", (ProducePartitionData(0, b"x" * 1500),)),)
    )
    throttle_ms = ctx.client_quotas.charge(
        Principal("User", "alice"), "app", ApiKey.PRODUCE, request, None, 0.0, now_ms
    )
    assert throttle_ms > 0
    families = scrape(ctx)
    labels = {"quota_type": "Produce", "user": "", "client_id": "app"}
    assert value(families["highwater_quota_limit"], "highwater_quota_limit", **labels) == 100
    assert value(families["highwater_quota_rate"], "highwater_quota_rate", **labels) > 100
    throttle = families["highwater_quota_throttle_time_ms"]
    assert value(throttle, "highwater_quota_throttle_time_ms_total", **labels) == throttle_ms
    # Another client-id has no quota: neither throttled nor shown.
    assert (
        ctx.client_quotas.charge(
            Principal("User", "alice"), "other", ApiKey.PRODUCE, request, None, 0.0, now_ms
        )
        == 0
    )
    assert [s.labels["client_id"] for s in families["highwater_quota_rate"]] == ["app"]


def test_client_quota_series_are_bounded(ctx: BrokerContext) -> None:
    ctx.client_quotas.update({QuotaEntity(None, DEFAULT_ENTITY): {"producer_byte_rate": 1e9}})
    request = ProduceRequest(1, 1000, (ProduceTopicData("a", (ProducePartitionData(0, b"x"),)),))
    now_ms = ctx.now_ms()
    for i in range(MAX_QUOTA_SERIES + 20):
        ctx.client_quotas.charge(
            Principal("User", "u"), f"c{i}", ApiKey.PRODUCE, request, None, 0.0, now_ms
        )
    assert len(scrape(ctx)["highwater_quota_rate"]) == MAX_QUOTA_SERIES
