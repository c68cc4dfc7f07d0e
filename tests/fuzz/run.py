"""Fuzz every request decoder and handler: `python -m tests.fuzz.run --inputs 1000000`.

Two targets per API of protocol.apis.APIS (tests/fuzz/targets.py has the inputs,
tests/fuzz/harness.py the checks): the request decoder, fed byte streams aimed at the API,
and its handler in a real in-process broker (a fresh one per API), fed requests that decode.
`--inputs` is the total, split evenly over the targets (APIs the broker does not serve get
the decoder target only). Hypothesis draws the inputs from a fixed seed (`--seed`), so a run
repeats exactly. Prints a table of inputs, crashes, hangs and stored-data changes per API and
target; exits 1 if any. docs/reliability.md ("A million frames") has the last figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

import structlog
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from broker.handlers import HANDLERS
from protocol.apis import APIS, ApiKey
from tests.fuzz.harness import DecoderTarget, FuzzBroker, Tally
from tests.fuzz.targets import decoder_inputs, handler_inputs

__all__ = ["Report", "fuzz", "main"]

T = TypeVar("T")
Report = dict[str, dict[str, Tally]]  # api name -> "decoder"/"handler" -> what happened


def _drive(
    strategy: st.SearchStrategy[T], target: Callable[[T], None], count: int, key: int
) -> None:
    """Feed `count` inputs drawn from `strategy` (seeded with `key`) to `target`."""
    if count <= 0:
        return

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(key)
    @given(strategy)
    def run(value: T) -> None:
        target(value)

    run()


Slot = tuple[ApiKey, str]  # an API and one of its targets


def slots_for(apis: list[ApiKey] | None, targets: tuple[str, ...]) -> list[Slot]:
    """Every (API, target) to run: handlers only for the APIs the broker serves."""
    keys = apis or sorted(APIS)
    return [(k, t) for k in keys for t in targets if t == "decoder" or k in HANDLERS]


def fuzz(
    total: int,
    *,
    base_seed: int = 22,
    apis: list[ApiKey] | None = None,
    targets: tuple[str, ...] = ("decoder", "handler"),
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Run both targets of every API (or of `apis`) with `total` inputs in all, split evenly,
    in `jobs` processes."""
    slots = slots_for(apis, targets)
    per_target = max(1, total // max(1, len(slots)))
    if jobs <= 1:
        return run_slots(slots, per_target, base_seed, progress)
    groups = [slots[i::jobs] for i in range(jobs)]
    report: Report = {}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(run_slots, g, per_target, base_seed, None) for g in groups]
        for future in concurrent.futures.as_completed(futures):
            for name, tallies in future.result().items():
                for target, tally in tallies.items():
                    report.setdefault(name, {})[target] = tally
                    if progress is not None:
                        progress(_row(name, target, tally, 0.0))
    order = {ApiKey(k).name: i for i, k in enumerate(sorted(APIS))}
    return dict(sorted(report.items(), key=lambda item: order.get(item[0], 0)))


def run_slots(
    slots: list[Slot],
    per_target: int,
    base_seed: int,
    progress: Callable[[str], None] | None,
) -> Report:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(50))  # quiet broker
    report: Report = {}
    for key, target in slots:
        name = ApiKey(key).name
        started = time.monotonic()
        salt = zlib.crc32(f"{name}/{target}".encode()) ^ base_seed
        if target == "decoder":
            decoder = DecoderTarget()
            _drive(decoder_inputs(key), decoder, per_target, salt)
            tally = decoder.tally
        else:
            with (
                tempfile.TemporaryDirectory(prefix="highwater-fuzz-") as directory,
                FuzzBroker(Path(directory)) as broker,
            ):
                _drive(handler_inputs(key), lambda r, b=broker: b.handle(*r), per_target, salt)
                broker.tally.data_changes += broker.check_stored_batches()
                tally = broker.tally
        report.setdefault(name, {})[target] = tally
        if progress is not None:
            progress(_row(name, target, tally, time.monotonic() - started))
    return report


def _row(name: str, target: str, tally: Tally, elapsed_s: float | None = None) -> str:
    took = "" if elapsed_s is None else f" {elapsed_s:7.1f} s  "
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(tally.outcomes.items()))
    return (
        f"{name:<30} {target:<8} {tally.inputs:>9} {len(tally.crashes):>7} "
        f"{len(tally.hangs):>5} {len(tally.data_changes):>12}{took}{outcomes if took else ''}"
    )


def summary(report: Report) -> str:
    lines = [
        f"{'API':<30} {'target':<8} {'inputs':>9} {'crashes':>7} {'hangs':>5} {'data changes':>12}"
    ]
    totals = Tally()
    for name, targets in report.items():
        for target, tally in targets.items():
            lines.append(_row(name, target, tally))
            totals.inputs += tally.inputs
            totals.crashes += tally.crashes
            totals.hangs += tally.hangs
            totals.data_changes += tally.data_changes
    lines.append(_row("total", "", totals))
    for name, targets in report.items():
        for target, tally in targets.items():
            for kind, found in (("CRASH", tally.crashes), ("HANG", tally.hangs)):
                lines += [f"{kind} {name} {target}: {item}" for item in found[:3]]
            lines += [f"DATA CHANGED {name} {target}: {item}" for item in tally.data_changes[:3]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs in all targets")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--api", action="append", help="only this API (repeatable)")
    parser.add_argument("--target", choices=["decoder", "handler"], action="append")
    parser.add_argument("--jobs", type=int, default=1, help="processes (the targets split)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    apis = [ApiKey[name.upper()] for name in args.api] if args.api else None
    targets = tuple(args.target) if args.target else ("decoder", "handler")
    print(
        f"{'API':<30} {'target':<8} {'inputs':>9} {'crashes':>7} {'hangs':>5} {'data changes':>12}"
    )
    report = fuzz(
        args.inputs,
        base_seed=args.seed,
        apis=apis,
        targets=targets,
        jobs=args.jobs,
        progress=lambda line: print(line, flush=True),
    )
    print()
    print(summary(report))
    if args.json is not None:
        plain = {n: {t: asdict(tally) for t, tally in ts.items()} for n, ts in report.items()}
        args.json.write_text(json.dumps(plain, indent=1))
    clean = all(t.clean for ts in report.values() for t in ts.values())
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
