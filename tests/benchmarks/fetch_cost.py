"""CPU of one replica fetch round, with and without fetch sessions (KIP-227), in-process.

Run: `.venv/bin/python -m tests.benchmarks.fetch_cost` (part of `make bench-latency`).
A leader and a follower (broker.core, real logs in a temporary directory) share `--partitions`
partitions, one of them busy. A round: the leader appends one small batch to the busy one;
the follower's core builds its Fetch, which is encoded and decoded as on the wire; the
leader's session core and read_fetch answer it, encoded and decoded again; the follower
applies the answer. CPU time (time.process_time) per round, sessions on and off, alternating:
what the session saves is the per-partition work for the idle partitions.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import structlog

from broker.config.log_config import LogConfig
from broker.core.fetch import read_fetch
from broker.core.fetch_session import FetchSessionCache, answer_fetch, open_fetch
from broker.core.follower import FetcherSettings, FetchRound, Follower
from broker.core.isr import IsrCore, IsrSettings
from broker.core.replica_manager import ReplicaManager
from broker.core.replication_quota import ReplicationQuota
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from protocol.apis import ApiKey
from protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol.messages.common import BrokerEndpoint
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition

NOW_MS = 1_700_000_000_000
LEADER, FOLLOWER = 1, 2
FETCH_VERSION = 1


def broker(broker_id: int, directory: Path, partitions: int, slots: int) -> BrokerState:
    logs = LogManager([directory], LogConfig())
    logs.startup(NOW_MS)
    replicas = ReplicaManager(broker_id, logs)
    isr = IsrCore(broker_id, IsrSettings(30_000, 5_000, 60_000), NOW_MS)
    state = BrokerState(replicas, isr, 1, fetch_sessions=FetchSessionCache(slots))
    states = tuple(
        LeaderAndIsrPartitionState(
            topic_name="t" if p == 0 else "idle",
            partition_index=p,
            controller_epoch=1,
            leader=LEADER,
            leader_epoch=0,
            isr=(LEADER, FOLLOWER),
            partition_epoch=0,
            replicas=(LEADER, FOLLOWER),
        )
        for p in range(partitions)
    )
    replicas.become_leader_or_follower(states, NOW_MS, wall_ms=NOW_MS)
    return state


def cpu_per_round_us(root: Path, partitions: int, slots: int, rounds: int) -> float:
    leader = broker(LEADER, root / "leader", partitions, slots)
    follower_state = broker(FOLLOWER, root / "follower", partitions, slots)
    settings = FetcherSettings(1 << 20, 1, 500, 1000, 30_000)
    follower = Follower(
        follower_state, settings, BrokerEndpoint(LEADER, "127.0.0.1", 9092), ReplicationQuota()
    )
    for tp in follower_state.replica_manager.partitions:
        follower.add(tp, 0)
        follower.partitions[tp].truncating = False
    busy = TopicPartition("t", 0)
    batch = build_batch([Record(b"x" * 100)], now_ms=NOW_MS)
    header = RequestHeader(ApiKey.FETCH, FETCH_VERSION, 0, "replica-fetcher-2")

    def one_round(now_ms: int) -> None:
        leader.replica_manager.append(busy, batch, now_ms)
        sent = follower.poll(now_ms)
        assert isinstance(sent, FetchRound)
        request = decode_request(encode_request(header, sent.request)[4:]).body
        context = open_fetch(leader.fetch_sessions, request, now_ms)
        read = read_fetch(leader, context.request, now_ms)
        answer = answer_fetch(context, read.response)
        wire = encode_response(0, ApiKey.FETCH, FETCH_VERSION, answer)[4:]
        response = decode_response(wire, ApiKey.FETCH, FETCH_VERSION).body
        follower.on_response(sent, response, now_ms, wall_ms=now_ms)

    for i in range(20):  # warm up: sessions opened, the HW caught up
        one_round(NOW_MS + i)
    started = time.process_time()
    for i in range(rounds):
        one_round(NOW_MS + 100 + i)
    used_s = time.process_time() - started
    end = follower_state.replica_manager.partitions[busy].log_end_offset
    assert end == leader.replica_manager.partitions[busy].log_end_offset, "follower behind"
    return used_s / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 18, 51])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print("CPU per replica fetch round (leader + follower, one partition busy), microseconds")
    for partitions in args.partitions:
        figures: dict[str, list[float]] = {"off": [], "on": []}
        for _run in range(args.runs):
            for name, slots in (("off", 0), ("on", 1000)):
                with tempfile.TemporaryDirectory(prefix="hw-fetch-cost-") as root:
                    figures[name].append(
                        cpu_per_round_us(Path(root), partitions, slots, args.rounds)
                    )
        off, on = statistics.median(figures["off"]), statistics.median(figures["on"])
        print(
            f"  {partitions:3d} partitions: sessions off {off:6.0f} us, on {on:6.0f} us "
            f"(on/off {on / off:.2f}; runs off {[round(x) for x in figures['off']]}, "
            f"on {[round(x) for x in figures['on']]})"
        )


if __name__ == "__main__":
    main()
