"""Hundreds of seeded whole-cluster simulations, each checking every invariant after every
step (see invariants.py) and ending with a converged, identical cluster.

A failing seed prints its replay command: `python -m tests.simulation.replay --seed N`.
Bugs it found are pinned as scenario tests in test_scenarios.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from tests.simulation.cluster import run_seed
from tests.simulation.config import SimConfig

# Every seed set alters configs among its faults (dynamic_configs.py, config_invariants.py):
# a topic's configs and the cluster-wide broker defaults changed as IncrementalAlterConfigs
# changes them; every live broker's open logs converge to what is stored, and the data
# invariants hold while segments, flushes and min.insync.replicas change under them.
GENERAL = SimConfig(dynamic_configs=True)
SEEDS = range(300)
# Four brokers, an operator among the faults: reassignments, elections, topics created and
# deleted, controlled shutdowns (operator.py, operator_invariants.py).
OPERATOR = SimConfig(brokers=4, enable_operator=True, dynamic_configs=True)
OPERATOR_SEEDS = range(1_020, 1_100)
# A compacted topic beside the plain one: keyed writes, tombstones, a log cleaner on two of
# three brokers (compaction.py: every replica serves the latest value of every key, but for
# what Kafka's cleaner removes before a lagging replica fetches it).
COMPACTED = SimConfig(compacted_topic=True, dynamic_configs=True)
COMPACTED_SEEDS = range(2_020, 2_080)
# A consumer group on "t" (four partitions) with its coordinator on __consumer_offsets
# (groups.py: no partition with two owners, member epochs only rise, acknowledged commits
# survive coordinator failover), its members paused and restarted among the broker faults.
GROUPS = SimConfig(consumer_groups=True, partitions=4, dynamic_configs=True)
GROUP_SEEDS = range(3_020, 3_080)
# ... with classic members in the same group (groups.py, classic_shell.py: JoinGroup,
# SyncGroup and Heartbeat through broker.core.group.classic, as the Kafka listener serves
# them): one KIP-848 member, two cooperative and one eager classic member on six partitions,
# under the same invariants.
CLASSIC_GROUPS = dataclasses.replace(GROUPS, partitions=6, group_members=1, group_classic_members=3)
CLASSIC_GROUP_SEEDS = range(3_120, 3_140)
# An idempotent producer on "t" (idempotence.py): no leader whose log holds a producer's
# acknowledged batch refuses the next one as out of order, and every new leader's producer
# state is the replay of its log.
IDEMPOTENT = dataclasses.replace(GENERAL, idempotent_producer=True)
IDEMPOTENT_SEEDS = range(4_020, 4_080)
# An authorizer on every broker (auth_invariants.py): ACLs created and deleted through
# ZooKeeper among the faults, produces, consumer fetches and ACL changes as User:admin (a
# super user), alice, bob and mallory; no request is served without the permission it needs.
# More seeds: `python -m tests.simulation.replay --seed N --authorizer --quiet`.
AUTHORIZER = dataclasses.replace(GENERAL, authorizer=True)
AUTHORIZER_SEEDS = range(5_020, 5_060)
# ... with the consumer group too: its members as User:admin, the others asking for its
# coordinator and offsets and committing for a group without members
# (GROUP_AUTHORIZATION_FAILED without the grant, and no refused commit committed).
AUTHORIZER_GROUPS = dataclasses.replace(GROUPS, authorizer=True)
AUTHORIZER_GROUP_SEEDS = range(5_120, 5_140)
# More seeds for the config changes, with four brokers and the operator too (topics created
# and deleted, reassignments meanwhile).
DYNAMIC_CONFIG_SEEDS = range(6_020, 6_060)
OPERATOR_DYNAMIC_CONFIG_SEEDS = range(6_120, 6_140)


@pytest.mark.parametrize("seed", SEEDS)
def test_seed(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, GENERAL)
    assert report.steps > 0


@pytest.mark.parametrize("seed", OPERATOR_SEEDS)
def test_seed_with_an_operator(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, OPERATOR)
    assert report.steps > 0


@pytest.mark.parametrize("seed", COMPACTED_SEEDS)
def test_seed_with_a_compacted_topic(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, COMPACTED)
    assert report.steps > 0


def test_seed_2067_a_follower_of_a_cleaned_log_lacks_a_key_another_replica_still_has(
    tmp_path: Path,
) -> None:
    """Seed 2067 as the compacted seeds drew it before dynamic configs (disk faults drawn,
    none happens): b2 fetched c-1 again from a leader whose cleaner had removed k1's values
    below its latest, and had no record of k1 at HW 9 while b3 held k1's first value below
    its HW 2. The agreement invariant failed there (pinned as an xfail, its reason a removed
    tombstone: k1 had none); both replicas were as Kafka's would be, and the invariant now
    excuses what a cleaner's removals explain. Scripted: test_scenarios.py's
    test_a_follower_of_a_cleaned_log_lacks_a_key_until_it_reaches_its_latest_record."""
    config = dataclasses.replace(COMPACTED, dynamic_configs=False)
    assert run_seed(2067, tmp_path, config).steps > 0


def test_the_cleaner_cleans(tmp_path: Path) -> None:
    """The compacted seeds above are not vacuous: cleaned segments are swapped in."""
    cleanings = [run_seed(s, tmp_path / str(s), COMPACTED).cleanings for s in range(2_000, 2_010)]
    assert sum(1 for c in cleanings if c > 0) >= 8, cleanings


@pytest.mark.parametrize("seed", GROUP_SEEDS)
def test_seed_with_a_consumer_group(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, GROUPS)
    assert report.steps > 0


@pytest.mark.parametrize("seed", CLASSIC_GROUP_SEEDS)
def test_seed_with_classic_and_kip_848_members_in_one_group(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, CLASSIC_GROUPS)
    assert report.steps > 0


@pytest.mark.parametrize("seed", IDEMPOTENT_SEEDS)
def test_seed_with_an_idempotent_producer(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, IDEMPOTENT)
    assert report.steps > 0


def test_the_idempotent_producer_is_exercised(tmp_path: Path) -> None:
    """The idempotent seeds are not vacuous: batches are acknowledged, some only after a
    resend (a duplicate the leader recognised, or a retry to a new leader), and new leaders'
    producer states are checked against their logs."""
    seen: Counter[str] = Counter()
    for seed in range(4_000, 4_010):
        seen.update(run_seed(seed, tmp_path / str(seed), IDEMPOTENT).idempotence)
    assert seen["NONE"] >= 100 and seen["acked after a resend"] >= 5, seen
    assert seen["producer states checked"] >= 50, seen


@pytest.mark.parametrize("seed", AUTHORIZER_SEEDS)
def test_seed_with_an_authorizer(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, AUTHORIZER)
    assert report.steps > 0


@pytest.mark.parametrize("seed", DYNAMIC_CONFIG_SEEDS)
def test_seed_with_dynamic_config_changes(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, GENERAL)
    assert report.steps > 0


@pytest.mark.parametrize("seed", OPERATOR_DYNAMIC_CONFIG_SEEDS)
def test_seed_with_an_operator_and_dynamic_config_changes(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, OPERATOR)
    assert report.steps > 0


def test_config_changes_are_exercised(tmp_path: Path) -> None:
    """The dynamic config seeds are not vacuous: configs are altered, and brokers are seen
    differing from what is stored and then converging to it."""
    seen: Counter[str] = Counter()
    for seed in range(6_000, 6_010):
        seen.update(run_seed(seed, tmp_path / str(seed), GENERAL).configs)
    assert seen["alterations"] >= 10 and seen["converged after a change"] >= 10, seen


@pytest.mark.parametrize("seed", AUTHORIZER_GROUP_SEEDS)
def test_seed_with_an_authorizer_and_a_consumer_group(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path, AUTHORIZER_GROUPS)
    assert report.steps > 0


def test_the_authorizer_is_exercised(tmp_path: Path) -> None:
    """The authorizer seeds are not vacuous: requests of every kind are served and refused,
    ACL changes are refused to principals without ALTER, and brokers load new ACLs."""
    seen: Counter[str] = Counter()
    for seed in range(5_000, 5_010):
        seen.update(run_seed(seed, tmp_path / str(seed), AUTHORIZER).authorization)
    for what in ("Produce", "consumer Fetch"):
        assert seen[f"{what}: served"] >= 20, seen
        assert seen[f"{what}: TOPIC_AUTHORIZATION_FAILED"] >= 20, seen
    for what in ("CreateAcls", "DeleteAcls"):
        assert seen[f"{what}: served"] >= 10, seen
        assert seen[f"{what}: CLUSTER_AUTHORIZATION_FAILED"] >= 3, seen
    assert seen["follower Fetch: served"] >= 100, seen
    assert seen["ACL states loaded by brokers"] >= 100, seen
    for seed in range(5_100, 5_105):
        seen.update(run_seed(seed, tmp_path / str(seed), AUTHORIZER_GROUPS).authorization)
    for what in ("FindCoordinator", "OffsetFetch"):
        assert seen[f"{what}: served"] >= 10, seen
        assert seen[f"{what}: GROUP_AUTHORIZATION_FAILED"] >= 5, seen
    assert seen["Heartbeat: served"] >= 100 and seen["OffsetCommit: served"] >= 10, seen
    assert seen["OffsetCommit: GROUP_AUTHORIZATION_FAILED"] >= 5, seen


def test_the_group_is_exercised(tmp_path: Path) -> None:
    """The group seeds are not vacuous: members rebalance, get fenced, and commits are
    acknowledged (and then checked after failovers)."""
    seen: Counter[str] = Counter()
    for seed in range(3_000, 3_010):
        seen.update(run_seed(seed, tmp_path / str(seed), GROUPS).group)
    assert seen["rebalances"] >= 30 and seen["lost"] >= 10 and seen["committed"] >= 30, seen


def test_the_classic_members_are_exercised(tmp_path: Path) -> None:
    """The mixed seeds are not vacuous: classic members join and rejoin, eager ones give up
    everything before rejoining, cooperative ones let go of what SyncGroup no longer gives
    them, and commits are acknowledged."""
    seen: Counter[str] = Counter()
    for seed in range(3_100, 3_106):
        seen.update(run_seed(seed, tmp_path / str(seed), CLASSIC_GROUPS).group)
    assert seen["classic joins"] >= 50 and seen["eager give-ups"] >= 5, seen
    assert seen["classic revocations"] >= 1 and seen["committed"] >= 20, seen


def test_the_operator_gets_everything_done(tmp_path: Path) -> None:
    """Across 20 seeds every kind of operator action happens and completes, so the
    invariants above were exercised, not skipped. Without the config changes: a preferred
    election answered NONE is rare (one in these 20 seeds without them, none in 60 with)."""
    done: Counter[str] = Counter()
    static = dataclasses.replace(OPERATOR, dynamic_configs=False)
    for seed in range(1_000, 1_020):
        done.update(run_seed(seed, tmp_path / str(seed), static).operator)
    for kind in (
        "controlled shutdowns",
        "preferred elections",
        "unclean elections",
        "reassignments completed",
        "topics deleted",
    ):
        assert done[kind] > 0, f"no {kind} in 20 seeds: {dict(done)}"


def test_fetch_sessions_are_exercised(tmp_path: Path) -> None:
    """Followers fetch incrementally (KIP-227) and the session invariant is checked with both
    sides agreeing, and sessions are also lost (evicted, leader restarts) and started over."""
    seen: Counter[str] = Counter()
    for seed in range(10):
        seen.update(run_seed(seed, tmp_path / str(seed), GENERAL).fetch_sessions)
    print(dict(seen))
    assert seen["incremental fetches"] >= 100 and seen["agreeing session checks"] >= 100, seen
    restarted = sum(
        n for what, n in seen.items() if what.startswith(("fetches refused", "sessions"))
    )
    assert restarted > 0, seen
