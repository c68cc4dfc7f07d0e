"""Replication benchmark: 3 brokers, RF=3, min.insync.replicas=2, acks=all (docs/operations.md,
"Benchmark", "Replication").

Run: `make bench-replication` (or `.venv/bin/python -m tests.benchmarks.replication`).
Starts its own local cluster (ZooKeeper + 3 brokers, `highwater dev up` in a temporary
directory on ports that are not the defaults), then:
- throughput: `highwater perf produce` of 100-byte records, acks=all, one producer, three
  runs; each prints its records/s and the build-batches-only rate measured in the same process
  right after it, with the ratio against the 0.33 floor;
- latency: `highwater perf end-to-end` at 10,000 records/s (produce to consume, p50/p99/p99.9).
Everything runs on this machine: the brokers, ZooKeeper and the client share its cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FLOOR = 0.33


def highwater(*args: str, bootstrap: str | None = None, tree: Path | None = None) -> str:
    """`highwater ARGS`' stdout; `tree`: run that checkout's code instead of this one's."""
    env = dict(os.environ)
    if bootstrap:
        env["HIGHWATER_BOOTSTRAP"] = bootstrap
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    command = [sys.executable, "-m", "client.cli", *args]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextmanager
def local_cluster(base_port: int, zk_port: int) -> Iterator[tuple[str, Path]]:
    """`highwater dev up` in a temporary directory on the given ports, `dev down` on the way
    out; yields (bootstrap, the temporary directory). The benchmarks' default ports are below
    Linux's ephemeral range (32768-60999), where a client's own connection could hold one."""
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as root:
        directory = str(Path(root) / "cluster")
        highwater(
            "dev", "up", "--dir", directory,
            "--base-port", str(base_port), "--zk-port", str(zk_port),
        )  # fmt: skip
        try:
            yield f"127.0.0.1:{base_port}", Path(root)
        finally:
            highwater("dev", "down", "--dir", directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=19092)
    parser.add_argument("--zk-port", type=int, default=32181)
    args = parser.parse_args()
    with local_cluster(args.base_port, args.zk_port) as (bootstrap, _):
        for topic in ("bench-throughput", "bench-latency"):
            highwater(
                "topics", "create", topic, "--partitions", "1",
                "--replication-factor", "3", "--config", "min.insync.replicas=2",
                bootstrap=bootstrap,
            )  # fmt: skip
        print("3 brokers, RF=3, min.insync.replicas=2, acks=all, 100-byte records")
        for run in range(1, args.runs + 1):
            out = highwater(
                "perf", "produce", "--topic", "bench-throughput",
                "--num-records", str(args.records), "--acks", "all",
                bootstrap=bootstrap,
            )  # fmt: skip
            print(f"-- throughput run {run}")
            last = out.strip().splitlines()[-3:]
            ratio = float(last[-1].rsplit(":", 1)[1])
            verdict = "ok" if ratio >= FLOOR else "BELOW the floor"
            print("\n".join(last) + f"  (the floor {FLOOR}: {verdict})")
        print("-- latency at a fixed rate")
        print(
            highwater(
                "perf", "end-to-end", "--topic", "bench-latency",
                "--num-records", "50000", "--throughput", "10000",
                bootstrap=bootstrap,
            ).strip()
        )  # fmt: skip


if __name__ == "__main__":
    main()
