"""The pipeline of docs/spark.md, run as a user runs it: page views produced into a topic, the
Spark job (client/spark/pageviews.py) counting views per page and minute from committed
records, its counts in Parquet and in an output topic, and that topic read with the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    running_cluster,
    whole_cluster_around,
)
from tests.integration.spark_session import spark, stopping

__all__ = ["spark"]  # the session fixture, imported for this module's tests

pytestmark = [pytest.mark.integration]

VIEWS = 3_000
SEED = 7
QUERY_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("spark-pipeline")
    with running_cluster(zookeeper.port, directory, FAST_REPLICATION) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


@pytest.mark.timeout(300)
def test_page_views_become_windowed_counts_in_parquet_and_a_topic(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    from client.spark.pageviews import expected_counts, generate_views, start_query

    trio.run(create_topic, cluster, "pageviews", [[1, 2, 3], [2, 3, 1]])
    trio.run(create_topic, cluster, "pageview-counts", [[3, 1, 2]])
    # Step 1, as the docs say: the example's producer, run as a command.
    out = subprocess.run(
        [
            *(sys.executable, "-m", "client.spark.pageviews", "-b", cluster.bootstrap),
            *("produce", "--count", str(VIEWS), "--seed", str(SEED)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"produced {VIEWS} page views" in out.stdout
    expected = expected_counts(generate_views(VIEWS, SEED))

    # Step 2: the job, on the tests' shared SparkSession (the `run` command builds its own).
    parquet = tmp_path / "counts.parquet"
    query = start_query(
        spark,
        bootstrap=cluster.bootstrap,
        source_topic="pageviews",
        output_topic="pageview-counts",
        parquet_dir=str(parquet),
        checkpoint_dir=str(tmp_path / "checkpoint"),
        available_now=True,
    )
    with stopping(query):
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow run did not finish"
        assert query.exception() is None

    # Parquet: the last update of each (page, window) holds its count.
    rows = spark.read.parquet(str(parquet)).orderBy("batch_id").collect()
    final = {r["key"]: r["count"] for r in rows}
    assert final == expected
    assert sum(final.values()) == VIEWS

    # Step 3: the output topic, read with the CLI: the last record per key is the count.
    done = subprocess.run(
        [
            *(sys.executable, "-m", "client.cli", "consume", "pageview-counts"),
            *("--from-beginning", "--exit-at-end", "--json", "-b", cluster.bootstrap),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    changelog: dict[str, int] = {}
    for line in done.stdout.splitlines():
        record = json.loads(line)
        changelog[record["key"]] = json.loads(record["value"])["count"]
    assert changelog == expected
