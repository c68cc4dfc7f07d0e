"""Filling a broker's disk for the restart curve, on either system: producer processes run
until the broker holds the target (polled from its segment files), progress printed as they
go; refused up front when the disk cannot take what RF=3 writes."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.benchmarks.proc_cpu import load_average

GIB = 1 << 30
REPLICAS_ON_THIS_DISK = 3  # RF=3, all three brokers on one machine: every byte written 3 times
# Left free beyond the fill: ZooKeeper, the brokers' own logs, indexes, the rest of the machine.
DISK_MARGIN_BYTES = 4 * GIB
POLL_S = 1.0
PROGRESS_EVERY_S = 20.0
# Bytes a round of producer processes sends together at most: the round ends, and the brokers'
# files are watched until still, before the next is sized from what they hold. (Stopping
# producers once the files showed the target overshot it by what was in flight: the files
# went on growing for about a minute after the producers were killed.)
ROUND_BYTES = 4 * GIB
STILL_POLLS = 3
STILL_TIMEOUT_S = 600.0


def data_bytes(data_dir: Path, topic: str) -> int:
    """Bytes of `topic`'s segment files (.log) under one broker's log dir."""
    return sum(p.stat().st_size for p in data_dir.glob(f"{topic}-*/*.log"))


def bytes_needed(target_bytes: int, held_bytes: int) -> int:
    """Disk a fill from `held_bytes` to `target_bytes` per broker takes, margin included."""
    return REPLICAS_ON_THIS_DISK * max(0, target_bytes - held_bytes) + DISK_MARGIN_BYTES


def disk_refusal(free_bytes: int, target_bytes: int, held_bytes: int) -> str | None:
    """Why a fill must not start (None: it may)."""
    needed = bytes_needed(target_bytes, held_bytes)
    if free_bytes >= needed:
        return None
    return (
        f"not enough disk to fill to {target_bytes / GIB:.1f} GiB per broker: "
        f"{REPLICAS_ON_THIS_DISK} replicas x {(target_bytes - held_bytes) / GIB:.1f} GiB more "
        f"+ {DISK_MARGIN_BYTES / GIB:.0f} GiB margin = {needed / GIB:.1f} GiB, "
        f"{free_bytes / GIB:.1f} GiB free"
    )


def check_disk(data_dir: Path, target_bytes: int, held_bytes: int) -> None:
    refusal = disk_refusal(shutil.disk_usage(data_dir).free, target_bytes, held_bytes)
    if refusal is not None:
        raise SystemExit(refusal)


def gib_per_min(filled_bytes: int, took_s: float) -> float:
    return filled_bytes / GIB / (took_s / 60) if took_s > 0 else 0.0


def start(command: Sequence[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def records_each(target_bytes: int, held_bytes: int, producers: int, record_size: int) -> int:
    """Records per producer process for a round: together what is still missing, at most
    ROUND_BYTES."""
    missing = min(max(0, target_bytes - held_bytes), ROUND_BYTES)
    return max(1, missing // producers // record_size)


def fullest_bytes(data_dirs: Sequence[Path], topic: str) -> int:
    """What the fullest broker holds of `topic`: with RF=3 on 3 brokers each holds every
    partition, the leaders ahead of their followers; once in sync, each holds this much."""
    return max(data_bytes(d, topic) for d in data_dirs)


def wait_still(data_dirs: Sequence[Path], topic: str) -> None:
    """Until no broker's bytes of `topic` grew for STILL_POLLS polls: a broker can still be
    appending produce requests it took in before its producers stopped."""
    last, still = [-1] * len(data_dirs), 0
    deadline = time.monotonic() + STILL_TIMEOUT_S
    while still < STILL_POLLS:
        now = [data_bytes(d, topic) for d in data_dirs]
        still = still + 1 if now == last else 0
        last = now
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: still growing after {STILL_TIMEOUT_S:g} s")
        time.sleep(POLL_S)  # a polling interval, not a synchronisation


def fill(
    label: str,
    command: Callable[[int], Sequence[str]],
    producers: int,
    record_size: int,
    data_dirs: Sequence[Path],
    topic: str,
    target_bytes: int,
    settle: Callable[[], object],
) -> int:
    """Rounds of `producers` processes of `command(records each)` at once, each round asking
    together for what the fullest broker (of `data_dirs`, their log dirs) still misses of
    `target_bytes` of `topic` (at most ROUND_BYTES), run to their end; after each, until no
    broker's bytes grow. Then `settle()` (every replica in sync). Prints the GiB held and the
    rate as it goes, and at the end the rate of what a broker holds once in sync; returns the
    fullest broker's bytes then."""
    started_bytes = held = fullest_bytes(data_dirs, topic)
    if held >= target_bytes:
        return held
    check_disk(data_dirs[0], target_bytes, held)
    started = shown = time.monotonic()
    while held < target_bytes:
        records = records_each(target_bytes, held, producers, record_size)
        running = [start(command(records)) for _ in range(producers)]
        try:
            while any(process.poll() is None for process in running):
                now = time.monotonic()
                if now - shown >= PROGRESS_EVERY_S:
                    shown = now
                    held = fullest_bytes(data_dirs, topic)
                    print(
                        f"{label} filling: {held / GIB:.2f} of {target_bytes / GIB:.0f} GiB, "
                        f"{gib_per_min(held - started_bytes, now - started):.2f} GiB/min",
                        flush=True,
                    )
                time.sleep(POLL_S)  # a polling interval, not a synchronisation
        finally:
            for process in running:
                if process.poll() is None:
                    process.kill()
            errors = [process.communicate()[1] for process in running]
        for process, error in zip(running, errors, strict=True):
            if process.returncode != 0:
                raise RuntimeError(
                    f"{label}: a producer exited with {process.returncode}\n"
                    f"{error.decode(errors='replace')[-4000:]}"
                )
        # The brokers' files go on growing after the producers end (followers catching up).
        wait_still(data_dirs, topic)
        held = fullest_bytes(data_dirs, topic)
    settle()
    took_s = time.monotonic() - started
    synced = fullest_bytes(data_dirs, topic)
    print(
        f"{label} filled: {(synced - started_bytes) / GIB:.2f} GiB in {took_s:.0f} s "
        f"({gib_per_min(synced - started_bytes, took_s):.2f} GiB/min, once in sync) with "
        f"{producers} producers; {load_average()}",
        flush=True,
    )
    return synced
