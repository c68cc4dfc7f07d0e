"""The Spark driver's blocking questions (client.spark.cluster) against the fake cluster, run in
a thread while the fake answers in trio: a hung broker first in the bootstrap list."""

from __future__ import annotations

import time

import trio

from client.metadata_view import METADATA_ATTEMPT_TIMEOUT_MS
from client.spark import cluster
from client.spark.offsets import TopicPartition
from client.spark.options import parse_source_options
from protocol.apis import ApiKey
from protocol.messages.metadata import MetadataRequest
from tests.unit.client.fake_broker import FakeCluster


async def test_a_hung_first_bootstrap_broker_costs_one_attempt_timeout(
    cluster3: FakeCluster,
) -> None:
    """Broker 1 reads the Metadata request and never answers (a stopped process): the driver
    asks the next after METADATA_ATTEMPT_TIMEOUT_MS, not after the 30 s request timeout."""
    cluster3.create_topic("t", 2)
    cluster3.stalled.add((1, ApiKey.METADATA))
    options = parse_source_options(
        {"bootstrap.servers": cluster3.bootstrap, "subscribe": "t"}, streaming=True
    )

    def timed_snapshot() -> tuple[cluster.OffsetSnapshot, float]:
        started = time.monotonic()
        found = cluster.snapshot(options)
        return found, time.monotonic() - started

    with trio.fail_after(20):
        found, elapsed_s = await trio.to_thread.run_sync(timed_snapshot)
    assert set(found.latest) == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert METADATA_ATTEMPT_TIMEOUT_MS / 1000 <= elapsed_s < 5, elapsed_s
    asked = [b for b, body in cluster3.requests if isinstance(body, MetadataRequest)]
    assert asked == [1, 2], asked
