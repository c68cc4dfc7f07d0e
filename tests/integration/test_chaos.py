"""Short chaos runs in `make test` (longer ones by hand: `python -m tests.chaos.run`).

A real ZooKeeper and 3 real brokers, 2 idempotent acks=all producers, 2 consumers and a
consumer group of 2 members (committing after processing, restarted every few seconds) over 3
partitions (RF=3, min.insync.replicas=2), while the nemesis kills, pauses, expires sessions,
bounces, corrupts files, loses acknowledgements, and (brokers in network namespaces, where
this machine allows them) cuts brokers off the network. The checker must find no anomaly, and
no idempotent producer may stop on a sequence error (tests/chaos/checker.py and
group_checker.py list the anomalies); without idempotence the same lost
acknowledgements must show up as duplicates, or the checker could not see them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.chaos.nemesis import KINDS
from tests.chaos.run import ChaosConfig, chaos_run
from tests.integration import netns

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(240)
async def test_a_short_chaos_run_with_every_nemesis_finds_no_anomaly(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    config = ChaosConfig(
        seed=20261122,
        duration_s=40,
        nemeses=tuple(k for k in KINDS if k != "partition"),
        lossy_links=True,
        overlap_share=0.5,
    )
    result = await chaos_run(config, zookeeper.port, tmp_path)
    print(result.summary())
    assert sum(result.faults.values()) >= 5, result.fault_log
    assert result.nemesis is not None and result.nemesis.ledger.overlapping >= 1, result.fault_log
    assert result.report.acked > 1000
    assert result.ok, result.summary()
    assert result.history.producer_restarts == 0, result.history.producer_errors
    assert result.group_history.restarts >= 2, result.summary()
    assert result.group_report.processed >= result.report.acked, result.summary()


@pytest.mark.timeout(240)
async def test_without_idempotence_lost_acks_show_up_as_duplicates(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    config = ChaosConfig(
        seed=2,
        duration_s=15,
        nemeses=("lose-acks",),
        lossy_links=True,
        idempotent=False,
        group_members=0,
    )
    result = await chaos_run(config, zookeeper.port, tmp_path)
    print(result.summary())
    assert result.faults["lose-acks"] >= 2
    assert result.report.counts["duplicate"] > 0, result.summary()
    others = {k: n for k, n in result.report.counts.items() if k != "duplicate"}
    assert not any(others.values()), result.summary()
    assert result.replicas_agree, result.replica_problem


@pytest.mark.timeout(240)
@pytest.mark.skipif(not netns.available(), reason="network namespaces need root (ip netns)")
async def test_a_chaos_run_with_network_partitions_finds_no_anomaly(tmp_path: Path) -> None:
    """Each broker in its own network namespace; the nemesis cuts brokers off (shorter and
    longer than their ZooKeeper session) and kills them."""
    # Seed 1 draws a partition first: the assertion below must not depend on how many steps a
    # slow machine fits in 30 s.
    config = ChaosConfig(seed=1, duration_s=30, nemeses=("partition", "kill"))
    with netns.NetworkLab(config.brokers) as lab:
        server = ZooKeeperServer(
            tmp_path / "zookeeper", free_port(lab.hub_address), host=lab.hub_address
        )
        server.start()
        try:
            result = await chaos_run(config, server.port, tmp_path / "cluster", lab=lab)
        finally:
            server.stop()
    print(result.summary())
    assert result.faults["partition"] >= 1, result.fault_log
    assert result.ok, result.summary()
    assert result.history.producer_restarts == 0, result.history.producer_errors
