"""Scraping real brokers' /metrics for integration tests: a 3-broker cluster whose brokers each
have a metrics listener on a free port, and the exposition parsed with prometheus-client's own
text parser."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import trio
from prometheus_client.parser import text_string_to_metric_families

from client.cli.zookeeper_server import free_port
from client.network import connect
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
)
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.replication_checks import running_cluster

__all__ = [
    "Scrape",
    "ascrape",
    "commit_offsets",
    "metrics_cluster",
    "metrics_port",
    "scrape",
    "value",
]

# (sample name, sorted label pairs) -> value
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@contextmanager
def metrics_cluster(
    zookeeper_port: int, directory: Path, overrides: Mapping[str, str]
) -> Iterator[Cluster]:
    per_broker = {i: {"metrics.listener": f"http://127.0.0.1:{free_port()}"} for i in range(1, 4)}
    with running_cluster(zookeeper_port, directory, overrides, per_broker) as cluster:
        yield cluster


def metrics_port(broker: BrokerProcess) -> int:
    return int(broker.overrides["metrics.listener"].rsplit(":", 1)[1])


def scrape(broker: BrokerProcess, timeout_s: float = 5.0) -> Scrape | None:
    """The broker's /metrics, parsed (None: it does not answer)."""
    url = f"http://127.0.0.1:{metrics_port(broker)}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read().decode()
    except (OSError, urllib.error.URLError):
        return None
    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return out


async def ascrape(broker: BrokerProcess) -> Scrape | None:
    return await trio.to_thread.run_sync(scrape, broker)


def value(found: Scrape, name: str, **labels: str) -> float:
    """One sample's value (0 if absent: a labelled family with no sample yet)."""
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def commit_offsets(
    cluster: Cluster, group: str, topic: str, offsets: Mapping[int, int]
) -> int:
    """Commit `offsets` (partition -> offset) for `group` as an admin would (no member), at
    its coordinator; returns the coordinator's broker id."""
    broker = cluster.running_brokers()[0]
    conn = await connect(broker.host, broker.port)
    try:

        async def coordinator() -> int | None:
            found = await conn.request(FindCoordinatorRequest((group,)))
            (answer,) = found.coordinators
            return int(answer.node_id) if answer.error_code == ErrorCode.NONE else None

        node = await eventually(coordinator, 30, f"group {group}'s coordinator")
    finally:
        await conn.aclose()
    target = cluster.brokers[node]
    partitions = tuple(OffsetCommitPartition(p, o) for p, o in sorted(offsets.items()))
    conn = await connect(target.host, target.port)
    try:
        answer = await conn.request(
            OffsetCommitRequest(group, (OffsetCommitTopic(topic, partitions),))
        )
    finally:
        await conn.aclose()
    assert {p.error_code for t in answer.topics for p in t.partitions} == {ErrorCode.NONE}
    return node
