"""The idempotent producer across leadership changes, scripted in the simulation: the soak's
story of a leader that lost its ZooKeeper session while cut off, was deposed without knowing
it, then followed (truncating whatever it had appended alone) and was elected again. Every
invariant is checked after every step, those of idempotence.py included: no leader refuses a
batch whose predecessor is acknowledged and held, and a new leader's producer state is the
replay of its log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.simulation.cluster import SimCluster, quiet_logs
from tests.simulation.idempotence import IdempotentProducer
from tests.simulation.test_scenarios import done_truncating, leads, scripted
from tests.simulation.zk import TopicPartition

TP = TopicPartition("t", 0)
RETRY_EVERY_MS = 50


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SimCluster]:
    config = scripted(
        idempotent_producer=True,
        replication_factor=2,
        min_insync_replicas=1,
        replica_lag_time_max_ms=1_000,  # the new leader drops the cut-off one soon
        produce_timeout_ms=3_000,
    )
    with quiet_logs():
        cluster = SimCluster(0, tmp_path, config)
        try:
            yield cluster
        finally:
            cluster.close()


def producer_of(cluster: SimCluster) -> IdempotentProducer:
    producer = cluster.producer.idempotent
    assert producer is not None
    cluster.producer.running = True  # sends and retries, without random ticks
    return producer


def send_and_wait(cluster: SimCluster, *names: str, timeout_ms: int = 30_000) -> None:
    """One batch per name; retried (same bytes) until every one is acknowledged."""
    producer = producer_of(cluster)
    for name in names:
        producer.add(TP, [name.encode()])
    deadline_ms = cluster.world.now_ms + timeout_ms
    while producer.unacked(TP):
        if cluster.world.now_ms >= deadline_ms:
            cluster.fail(f"batches {names} not acknowledged: {dict(producer.counts)}")
        cluster.run_for(RETRY_EVERY_MS)
        producer.retry()


@pytest.mark.parametrize("own_tail", [False, True], ids=["no-tail", "divergent-tail"])
def test_a_leader_deposed_while_cut_off_follows_and_leads_again(
    cluster: SimCluster, own_tail: bool
) -> None:
    cluster.boot()
    producer = producer_of(cluster)
    first = cluster.leader_of(TP)
    (other,) = (b for b in cluster.zk_isr(TP) if b != first)
    send_and_wait(cluster, "a", "b", "c")

    cluster.isolate(first)  # it still leads, as far as it knows
    if own_tail:  # a batch it appends alone: never replicated, never acknowledged
        end = cluster.broker(first).partitions[TP].log_end_offset
        producer.add(TP, [b"d"])
        cluster.run_until(
            lambda: cluster.broker(first).partitions[TP].log_end_offset > end,
            1_000,
            "the cut-off leader to append its own batch",
        )
    epoch = cluster.world.zk.states[TP][0].leader_epoch
    # Its session expires and ZooKeeper stays out of its reach for a while (the soak's
    # broker 2, off the network for 5.6 s): the controller elects the other replica.
    cluster.broker(first).expire_session(reconnect_ms=3_000)
    cluster.run_until(leads(cluster, other), 5_000, "the other replica to lead")
    assert cluster.world.zk.states[TP][0].leader_epoch > epoch
    assert cluster.broker(first).partitions[TP].is_leader, "deposed without knowing it"
    send_and_wait(cluster, "e", "f", "g")  # "d" too, if it was queued: retried here

    cluster.heal()
    cluster.run_until(
        lambda: (
            not cluster.broker(first).partitions[TP].is_leader and done_truncating(cluster, first)()
        ),
        10_000,
        "the deposed leader to follow",
    )
    cluster.wait_settled()
    cluster.crash(other, keep="all")
    cluster.run_until(leads(cluster, first), 5_000, "the first leader to lead again")
    send_and_wait(cluster, "h", "i")  # its producer state must follow "g"
    assert producer.counts["OUT_OF_ORDER_SEQUENCE_NUMBER"] == 0, dict(producer.counts)
    cluster.restart(other)
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []
