"""How long a `highwater` command takes from start to exit, this tree against REF's.

Run against a running cluster with a topic holding a few records, e.g. after
`highwater dev up` and `seq 3 | highwater produce T`:

    .venv/bin/python -m tests.benchmarks.cli_startup --topic T [--base REF] [--runs 8]

Each command runs in a fresh interpreter (`python -m client.cli.main`) with PYTHONPATH set to
one tree, the two trees alternating; it prints the fastest and the median run of each. The
difference is start-up: imports, then the command's own round trips, the same in both.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.compare import ROOT, checkout


def commands(topic: str) -> dict[str, tuple[list[str], bytes | None]]:
    return {
        "produce one record": (["produce", topic, "--acks", "1"], b"a\n"),
        "consume to the end": (["consume", topic, "--from-beginning", "--exit-at-end"], None),
        "topics list": (["topics", "list"], None),
        "--version": (["--version"], None),
        "--help": (["--help"], None),
    }


def elapsed_ms(tree: Path, args: list[str], stdin: bytes | None) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "client.cli.main", *args],
        input=stdin,
        env=env,
        capture_output=True,
        cwd=tempfile.gettempdir(),  # not ROOT: its tree must not shadow PYTHONPATH's
        check=True,
        timeout=60,
    )
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--base", default="HEAD", help="the commit to compare with")
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    table = commands(args.topic)
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        trees = {"base": checkout(args.base, Path(scratch)), "this tree": ROOT}
        for tree in trees.values():
            # Both with bytecode, as an installed package has (PYTHONDONTWRITEBYTECODE=1 in
            # some shells would have the fresh checkout compile every module on every run).
            for package in ("protocol", "broker", "controller", "client"):
                compileall.compile_dir(tree / package, quiet=1)
        for _ in range(args.runs):
            for label, tree in trees.items():
                for name, (command, stdin) in table.items():
                    times.setdefault((name, label), []).append(elapsed_ms(tree, command, stdin))
    print(f"{'command':22} {'base: fastest, median':>24} {'this tree: fastest, median':>28}")
    for name in table:
        base, this = times[(name, "base")], times[(name, "this tree")]
        print(
            f"{name:22} {min(base):>12.0f} {statistics.median(base):>8.0f} ms"
            f" {min(this):>16.0f} {statistics.median(this):>8.0f} ms"
        )


if __name__ == "__main__":
    main()
