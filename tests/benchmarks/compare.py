"""Before and after: the same measures on two builds, alternating, in one run (docs/performance.md).

Run: `make bench-compare ARGS="--base REF"` (or `.venv/bin/python -m tests.benchmarks.compare
--base REF`). The base build is REF's tree (`git archive`), the current one this working tree.
Each run starts a build's own cluster (`highwater dev up`: ZooKeeper + 3 brokers), creates
1-partition RF=3 topics with min.insync.replicas=2, and runs that build's `perf produce`
(acks=all; with the build-only ceiling of the same process), `perf consume` (with the
decode-only ceiling) and `perf end-to-end` at 10,000 records/s with the brokers' CPU from
/proc. Builds alternate run by run, so the machine's other load falls on both. Each run also
times a fixed pure-Python loop first (`yardstick ms`): the absolute figures move with the
machine's speed, which differed by 2-3 times between days here (docs/performance.md).
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tests.benchmarks.proc_cpu import cluster_pids, total_cpu_seconds
from tests.benchmarks.replication import highwater

ROOT = Path(__file__).resolve().parents[2]
_RATE = re.compile(r"([\d.]+) records/sec")
_CEILING = re.compile(r"only \(same process, same batches\): ([\d.]+) records/sec")
_CONSUMED = re.compile(r"^[\d-]+ [\d:]+, [\d-]+ [\d:]+, [\d.]+, [\d.]+, \d+, ([\d.]+),", re.M)
_PERCENTILES = re.compile(r"([\d.]+) ms 50th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th")


def yardstick_ms() -> float:
    """The fastest of three runs of a fixed loop of 1,000,000 additions, in ms: how fast this
    machine runs Python just now (the same for both builds, so it only describes the machine)."""
    best = float("inf")
    for _ in range(3):
        started, total = time.perf_counter(), 0
        for i in range(1_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return best * 1000


def checkout(ref: str, into: Path) -> Path:
    """REF's tree (committed files only) in `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def one_run(tree: Path, scratch: Path, args: argparse.Namespace) -> dict[str, float]:
    yardstick = yardstick_ms()
    cluster = scratch / "cluster"
    bootstrap = f"127.0.0.1:{args.base_port}"
    up = ("--dir", str(cluster), "--base-port", str(args.base_port), "--zk-port", str(args.zk_port))
    try:
        highwater("dev", "up", *up, tree=tree)  # a failed start leaves what did start
        for topic in ("throughput", "latency"):
            highwater(
                "topics", "create", topic, "--partitions", "1", "--replication-factor", "3",
                "--config", "min.insync.replicas=2", bootstrap=bootstrap, tree=tree,
            )  # fmt: skip
        records = str(args.records)
        produced = highwater(
            "perf", "produce", "--topic", "throughput", "--num-records", records,
            "--acks", "all", bootstrap=bootstrap, tree=tree,
        )  # fmt: skip
        consumed = highwater(
            "perf", "consume", "--topic", "throughput", "--messages", records,
            bootstrap=bootstrap, tree=tree,
        )  # fmt: skip
        pids = [pid for name, pid in cluster_pids(cluster).items() if name.startswith("broker")]
        before_s, started = total_cpu_seconds(pids), time.monotonic()
        latency = highwater(
            "perf", "end-to-end", "--topic", "latency", "--num-records",
            str(args.e2e_records), "--throughput", "10000", bootstrap=bootstrap, tree=tree,
        )  # fmt: skip
        cores = (total_cpu_seconds(pids) - before_s) / (time.monotonic() - started)
    finally:
        highwater("dev", "down", *up[:2], tree=tree)
    figures = {
        "produce": _first(_RATE, produced),
        "build-only": _first(_CEILING, produced),
        "consume": _first(_CONSUMED, consumed),
        "decode-only": _first(_CEILING, consumed),
        "broker cores": cores,
    }
    p50, p99, p999 = (float(x) for x in _search(_PERCENTILES, latency).groups())
    return {**figures, "p50 ms": p50, "p99 ms": p99, "p99.9 ms": p999, "yardstick ms": yardstick}


def _search(pattern: re.Pattern[str], text: str) -> re.Match[str]:
    match = pattern.search(text)
    if match is None:
        raise SystemExit(f"no {pattern.pattern!r} in:\n{text}")
    return match


def _first(pattern: re.Pattern[str], text: str) -> float:
    return float(_search(pattern, text).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the build to compare with (a git ref)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--e2e-records", type=int, default=100_000)
    parser.add_argument("--base-port", type=int, default=19392)
    parser.add_argument("--zk-port", type=int, default=32481)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-compare-") as root:
        builds = {
            f"base ({args.base})": checkout(args.base, Path(root) / "base"),
            "current": ROOT,
        }
        results: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
        for run in range(args.runs):
            # The builds take turns at going first: the machine's speed drifts within minutes.
            order = list(builds.items())
            for name, tree in order[::-1] if run % 2 else order:
                figures = one_run(tree, Path(root) / f"{run}-{len(results[name])}-{id(tree)}", args)
                results[name].append(figures)
                shown = ", ".join(f"{k} {v:,.2f}" for k, v in figures.items())
                print(f"run {run + 1} {name}: {shown}", file=sys.stderr, flush=True)
    names = list(results)
    print(f"medians [ranges] of {args.runs} runs: " + " | ".join(names) + " | current/base")
    for key in results[names[0]][0]:
        cells, medians = [], []
        for name in names:
            values = [r[key] for r in results[name]]
            medians.append(statistics.median(values))
            cells.append(f"{medians[-1]:,.2f} [{min(values):,.2f}-{max(values):,.2f}]")
        ratio = medians[1] / medians[0] if medians[0] else float("nan")
        print(f"{key:<14}" + "".join(f"  {c:>38}" for c in cells) + f"{ratio:>8.2f}")


if __name__ == "__main__":
    main()
