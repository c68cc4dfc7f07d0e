"""The part of a controller failover that grows with partitions, alone: the new controller's
read of every partition's state znode (controller/zk_load.py `read_partition_states`)
through the broker's ZooKeeper client against a real ZooKeeper.

Run: `.venv/bin/python -m tests.benchmarks.curves.zk_reads [--partitions 100 1000 3000]`."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import trio

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from controller import zk_data
from controller.zk_client import ZkClient
from controller.zk_load import read_partition_states
from controller.zk_types import CreateOp
from protocol.topic_partition import TopicPartition

SESSION_TIMEOUT_MS = 6000
CREATE_BATCH = 500


async def seconds_to_read(hosts: str, partitions: int, runs: int) -> list[tuple[float, float]]:
    """Per run: wall seconds and this process's CPU seconds (kazoo's threads included)."""
    zk = await ZkClient.connect(hosts, SESSION_TIMEOUT_MS)
    try:
        topic = f"t{partitions}"
        state = zk_data.PartitionStateZnode(1, 0, (1, 2, 3), 1).encode()
        await zk.create(zk_data.partitions_path(topic), b"", makepath=True)
        for start in range(0, partitions, CREATE_BATCH):
            ops = []
            for p in range(start, min(partitions, start + CREATE_BATCH)):
                ops.append(CreateOp(zk_data.partition_path(topic, p), b""))
                ops.append(CreateOp(zk_data.partition_state_path(topic, p), state))
            await zk.transaction(ops)
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        took = []
        for _ in range(runs):
            started, started_cpu = time.monotonic(), time.process_time()
            states = await zk.run(read_partition_states(wanted))
            took.append((time.monotonic() - started, time.process_time() - started_cpu))
            assert len(states) == partitions, len(states)
        return took
    finally:
        await zk.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 1000, 3000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-zk-reads-") as root:
        zookeeper = ZooKeeperServer(Path(root) / "zookeeper", free_port())
        zookeeper.start()
        try:
            for partitions in args.partitions:
                took = trio.run(seconds_to_read, zookeeper.connect_string, partitions, args.runs)
                walls = ", ".join(f"{wall * 1000:.0f}" for wall, _ in took)
                cpus = ", ".join(f"{cpu * 1000:.0f}" for _, cpu in took)
                best_cpu = min(cpu for _, cpu in took)
                print(
                    f"{partitions:5d} partition states read in {walls} ms, CPU {cpus} ms "
                    f"({best_cpu / partitions * 1e6:.0f} us CPU per partition, best run)",
                    flush=True,
                )
        finally:
            zookeeper.stop()


if __name__ == "__main__":
    main()
