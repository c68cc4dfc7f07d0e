"""Short chaos runs in `make test` (longer ones by hand: `python -m tests.chaos.run`).

A real ZooKeeper and 3 real brokers, 2 idempotent acks=all producers and 2 consumers over 3
partitions (RF=3, min.insync.replicas=2), while the nemesis kills, pauses, expires sessions,
bounces and loses acknowledgements. The checker must find no anomaly; and without idempotence
the same lost acknowledgements must show up as duplicates, or the checker could not see them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from client.zookeeper_server import ZooKeeperServer
from tests.chaos.nemesis import KINDS
from tests.chaos.run import ChaosConfig, chaos_run

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(240)
async def test_a_short_chaos_run_with_every_nemesis_finds_no_anomaly(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    config = ChaosConfig(seed=20261122, duration_s=30, nemeses=KINDS, lossy_links=True)
    result = await chaos_run(config, zookeeper.port, tmp_path)
    print(result.summary())
    assert sum(result.faults.values()) >= 5, result.fault_log
    assert result.report.acked > 1000
    assert result.ok, result.summary()


@pytest.mark.timeout(240)
async def test_without_idempotence_lost_acks_show_up_as_duplicates(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    config = ChaosConfig(
        seed=2, duration_s=15, nemeses=("lose-acks",), lossy_links=True, idempotent=False
    )
    result = await chaos_run(config, zookeeper.port, tmp_path)
    print(result.summary())
    assert result.faults["lose-acks"] >= 2
    assert result.report.counts["duplicate"] > 0, result.summary()
    others = {k: n for k, n in result.report.counts.items() if k != "duplicate"}
    assert not any(others.values()), result.summary()
    assert result.replicas_agree, result.replica_problem
