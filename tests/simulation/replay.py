"""Replay one simulation seed, printing every step.

    python -m tests.simulation.replay --seed 17 [--steps 1000] [--operator] [--compacted] [--groups]
        [--classic] [--idempotent] [--authorizer] [--dynamic-configs] [--quiet] [--count 1]

Exits 1 (after printing the failure) if an invariant breaks, 0 with a summary otherwise.
With `--count N`, seeds 17 to 17 + N - 1 one after another, a line each (a sweep of new
seeds); exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

from tests.simulation.cluster import SimulationFailure, run_seed
from tests.simulation.config import SimConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=SimConfig().chaos_steps, help="steps of chaos")
    parser.add_argument("--quiet", action="store_true", help="only the summary or failure")
    parser.add_argument(
        "--operator", action="store_true", help="4 brokers and an operator (test_simulation.py)"
    )
    parser.add_argument(
        "--compacted", action="store_true", help="a compacted topic and log cleaners too"
    )
    parser.add_argument(
        "--groups", action="store_true", help="a consumer group and its coordinator too"
    )
    parser.add_argument(
        "--classic",
        action="store_true",
        help="the group mixes classic members (test_simulation.py's CLASSIC_GROUPS)",
    )
    parser.add_argument(
        "--idempotent", action="store_true", help="an idempotent producer on the plain topic"
    )
    parser.add_argument(
        "--authorizer",
        action="store_true",
        help="an authorizer, ACL changes and principals' requests (auth_invariants.py)",
    )
    parser.add_argument(
        "--dynamic-configs",
        action="store_true",
        help="topic configs and broker defaults altered among the faults (config_invariants.py)",
    )
    parser.add_argument(
        "--count", type=int, default=1, help="run this many seeds from --seed on, quietly"
    )
    args = parser.parse_args(argv)
    base = SimConfig(brokers=4, enable_operator=True) if args.operator else SimConfig()
    if args.compacted:
        base = dataclasses.replace(base, compacted_topic=True)
    if args.groups:
        base = dataclasses.replace(base, consumer_groups=True, partitions=4)
    if args.classic:
        base = dataclasses.replace(
            base, consumer_groups=True, partitions=6, group_members=1, group_classic_members=3
        )
    if args.idempotent:
        base = dataclasses.replace(base, idempotent_producer=True)
    if args.authorizer:
        base = dataclasses.replace(base, authorizer=True)
    if args.dynamic_configs:
        base = dataclasses.replace(base, dynamic_configs=True)
    config = dataclasses.replace(base, chaos_steps=args.steps)
    if args.count > 1:
        return _sweep(range(args.seed, args.seed + args.count), config)
    with tempfile.TemporaryDirectory(prefix=f"hw-sim-{args.seed}-") as directory:
        try:
            report = run_seed(args.seed, Path(directory), config, out=None if args.quiet else print)
        except SimulationFailure as exc:
            print(f"\nFAILED: {exc}", file=sys.stderr)
            return 1
    print(
        f"\nseed {report.seed}: OK after {report.steps} steps ({report.sim_ms} simulated ms); "
        f"{report.produced} produces, {report.acked} acked "
        f"({report.unprotected_acks} lost every ISR holder, {report.lost_unprotected_acks} of "
        f"those actually lost), {report.crashes} crashes, {report.controllers} controller "
        f"elections, {report.messages_dropped} messages dropped; produce outcomes "
        f"{report.produce_outcomes}"
        + (f"; the operator got done: {report.operator}" if config.enable_operator else "")
        + (f"; idempotence: {report.idempotence}" if args.idempotent else "")
        + (f"; authorization: {report.authorization}" if args.authorizer else "")
        + (f"; configs: {report.configs}" if args.dynamic_configs else "")
    )
    return 0


def _sweep(seeds: range, config: SimConfig) -> int:
    failed = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix=f"hw-sim-{seed}-") as directory:
            try:
                report = run_seed(seed, Path(directory), config)
            except SimulationFailure as exc:
                failed.append(seed)
                print(f"seed {seed}: FAILED: {str(exc).splitlines()[0]}", flush=True)
                continue
        print(f"seed {seed}: OK after {report.steps} steps", flush=True)
    print(f"\n{len(seeds) - len(failed)} of {len(seeds)} seeds passed; failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
