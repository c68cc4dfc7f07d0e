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
from tests.integration.cluster_harness import BrokerProcess, Cluster
from tests.integration.replication_checks import running_cluster

__all__ = ["Scrape", "ascrape", "metrics_cluster", "metrics_port", "scrape"]

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
