"""read_fetch (broker.core.fetch): a partition with nothing to read is answered without reading
its log; that answer, and what the fetch changes (HW, follower state, ISR writes), must be the
ones the full read gives."""

from __future__ import annotations

import logging
import random
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest
import structlog

from broker.config.log_config import LogConfig
from broker.core import fetch as fetch_module
from broker.core.fetch import FetchRead, read_fetch
from broker.core.isr import IsrCore, IsrSettings
from broker.core.partition import DEBUG_REPLICA_ID
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition

NOW_MS = 1_700_000_000_000
LEADER = 1
TOPIC = "t"
PARTITIONS = 3
EPOCH = 4


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def leader(directory: Path) -> BrokerState:
    logs = LogManager([directory], LogConfig())
    logs.startup(NOW_MS)
    replicas = ReplicaManager(LEADER, logs)
    isr = IsrCore(LEADER, IsrSettings(30_000, 5_000, 60_000), NOW_MS)
    state = BrokerState(replicas, isr, 1)
    replicas.become_leader_or_follower(
        tuple(
            LeaderAndIsrPartitionState(
                topic_name=TOPIC,
                partition_index=p,
                controller_epoch=1,
                leader=LEADER,
                leader_epoch=EPOCH,
                isr=(LEADER, 2),  # 3 is out: its fetches may let it back in
                partition_epoch=0,
                replicas=(LEADER, 2, 3),
            )
            for p in range(PARTITIONS)
        ),
        NOW_MS,
        wall_ms=NOW_MS,
    )
    return state


def snapshot(state: BrokerState) -> list[object]:
    """What a fetch may change in the leader's partitions."""
    return [
        (
            p.high_watermark,
            p.log_end_offset,
            p.pending_isr,
            sorted((r, astuple(remote)) for r, remote in p.remotes.items()),
        )
        for _, p in sorted(state.replica_manager.partitions.items())
    ]


def outcome(read: FetchRead) -> tuple[object, ...]:
    return (read.response, read.total_bytes, read.has_error, read.wake, read.isr_writes)


@pytest.mark.parametrize("seed", range(20))
def test_nothing_to_read_answers_as_a_read_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    fast, full = leader(tmp_path / "fast"), leader(tmp_path / "full")
    real_check = fetch_module._readable_end
    counted: list[bool] = []

    def counting(*args: Any) -> int:
        answer = real_check(*args)
        counted.append(answer >= 0)
        return answer

    for step in range(200):
        now_ms = NOW_MS + step * 10
        if rng.random() < 0.3:
            tp = TopicPartition(TOPIC, rng.randrange(PARTITIONS))
            batch = build_batch([Record(b"v")] * rng.randint(1, 3), now_ms=now_ms)
            for state in (fast, full):
                state.replica_manager.append(tp, batch, now_ms)
            continue
        replica_id = rng.choice([2, 3, -1, DEBUG_REPLICA_ID])
        wanted = []
        for p in range(PARTITIONS):
            partition = fast.replica_manager.partitions[TopicPartition(TOPIC, p)]
            ends = [partition.log_end_offset, partition.high_watermark, 0]
            offset = max(0, rng.choice(ends) + rng.choice([-1, 0, 0, 0, 1]))
            epoch = rng.choice([-1, EPOCH, EPOCH, EPOCH - 1, EPOCH + 1])
            wanted.append(FetchPartition(p, offset, 1 << 20, current_leader_epoch=epoch))
        request = FetchRequest(replica_id, 500, 1, 1 << 20, (FetchTopic(TOPIC, tuple(wanted)),))
        monkeypatch.setattr(fetch_module, "_readable_end", counting)
        answer_fast = outcome(read_fetch(fast, request, now_ms))
        monkeypatch.setattr(fetch_module, "_readable_end", lambda *_: -1)
        answer_full = outcome(read_fetch(full, request, now_ms))
        assert answer_fast == answer_full, f"seed {seed} step {step}"
        assert snapshot(fast) == snapshot(full), f"seed {seed} step {step}"
    assert sum(counted) > 20, sum(counted)  # the short way was taken, often
