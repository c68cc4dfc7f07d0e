"""The leader's CPU per partition of an idle follower's long-poll fetch, in-process.

Run: `.venv/bin/python -m tests.benchmarks.idle_fetch [--partitions 333] [--fetches 300]`.
One leader (broker.core, real logs in a temporary directory) leads `--partitions` partitions
(RF=3, ISR all), the follower's session covers every one of them and nothing is appended: a
fetch is `open_fetch` (incremental, naming nothing), a DelayedFetch tried at once, then at
its deadline with no key woken (as both purgatory drivers do: one last try, then `expire`),
`count_sent` and `answer_fetch`. 333 partitions is one follower's session with one leader
at 1,000 partitions on 3 brokers. Prints the median and the lowest of `--runs` runs, in µs
of CPU (time.process_time) per partition per fetch (on a shared machine the lowest is the
steadier figure).
"""

from __future__ import annotations

import argparse
import inspect
import logging
import statistics
import tempfile
import time
from pathlib import Path

import structlog

from broker.config.log_config import LogConfig
from broker.core.delayed import DelayedFetch
from broker.core.fetch import count_sent
from broker.core.fetch_session import FetchSessionCache, answer_fetch, open_fetch
from broker.core.isr import IsrCore, IsrSettings
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from protocol.messages.fetch import INITIAL_EPOCH, FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState

NOW_MS = 1_700_000_000_000
LEADER, FOLLOWER = 1, 2
WAIT_MS = 500


def leader(directory: Path, partitions: int) -> BrokerState:
    logs = LogManager([directory], LogConfig())
    logs.startup(NOW_MS)
    replicas = ReplicaManager(LEADER, logs)
    isr = IsrCore(LEADER, IsrSettings(30_000, 5_000, 60_000), NOW_MS)
    state = BrokerState(replicas, isr, 1, fetch_sessions=FetchSessionCache(10))
    replicas.become_leader_or_follower(
        tuple(
            LeaderAndIsrPartitionState(
                topic_name="idle",
                partition_index=p,
                controller_epoch=1,
                leader=LEADER,
                leader_epoch=1,
                isr=(LEADER, FOLLOWER, 3),
                partition_epoch=0,
                replicas=(LEADER, FOLLOWER, 3),
            )
            for p in range(partitions)
        ),
        NOW_MS,
        wall_ms=NOW_MS,
    )
    return state


def _last_try_says_unwoken() -> bool:
    """Whether DelayedFetch.try_complete takes `woken` (to run against older commits too)."""
    return "woken" in inspect.signature(DelayedFetch.try_complete).parameters


def run(partitions: int, fetches: int) -> float:
    """µs of CPU per partition per idle fetch."""
    with tempfile.TemporaryDirectory() as directory:
        state = leader(Path(directory), partitions)
        cache = state.fetch_sessions
        every = tuple(FetchPartition(p, 0, 1 << 20, 1) for p in range(partitions))
        full = FetchRequest(
            FOLLOWER,
            WAIT_MS,
            1,
            1 << 20,
            (FetchTopic("idle", every),),
            session_id=0,
            session_epoch=INITIAL_EPOCH,
        )
        now_ms = NOW_MS
        unwoken = {"woken": False} if _last_try_says_unwoken() else {}
        session_id, epoch = 0, INITIAL_EPOCH
        started = 0.0
        for i in range(fetches + 2):  # the full fetch and one incremental one: not counted
            if i == 2:
                started = time.process_time()
            request = (
                full
                if epoch == INITIAL_EPOCH
                else FetchRequest(
                    FOLLOWER, WAIT_MS, 1, 1 << 20, (), session_id=session_id, session_epoch=epoch
                )
            )
            context = open_fetch(cache, request, now_ms)
            fetch = DelayedFetch(context.request)
            done = fetch.try_complete(state, now_ms)
            fetch.take_actions()
            if not done:
                now_ms += WAIT_MS
                fetch.try_complete(state, now_ms, **unwoken)
                fetch.take_actions()
                fetch.expire(now_ms)
            response = fetch.response()
            count_sent(state, context.request, response)
            answer = answer_fetch(context, response)
            assert i < 2 or not answer.responses, "an idle fetch names no partition"
            session_id, epoch = answer.session_id, epoch + 1
        return (time.process_time() - started) / fetches / partitions * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=333)
    parser.add_argument("--fetches", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results = [run(args.partitions, args.fetches) for _ in range(args.runs)]
    print(
        f"{args.partitions} idle partitions: median {statistics.median(results):.2f}, lowest "
        f"{min(results):.2f} µs per partition per fetch "
        f"(runs {', '.join(f'{r:.2f}' for r in results)})"
    )


if __name__ == "__main__":
    main()
