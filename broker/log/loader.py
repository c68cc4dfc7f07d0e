"""Opening a log directory (Kafka's LogLoader): stray files a crash left, the segments present,
and the leader-epoch cache, rebuilt from batch headers when its checkpoint is missing or
corrupt."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import structlog

from broker.config.log_config import LogConfig
from broker.log.checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.segment import LogSegment

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "SWAP_SUFFIX",
    "finish_swaps",
    "open_epoch_cache",
    "remove_stray_files",
    "segment_bases",
]

LEADER_EPOCH_CHECKPOINT_FILE: Final = "leader-epoch-checkpoint"
SWAP_SUFFIX: Final = ".swap"
_STRAY_SUFFIXES: Final = (".tmp", ".deleted", ".cleaned", SWAP_SUFFIX)


def finish_swaps(directory: Path, config: LogConfig, now_ms: int) -> list[int]:
    """Complete the segment swaps a crash interrupted (Kafka's LogLoader): a `.log.swap` is a
    whole cleaned segment, so the old segments it replaces (base offsets from its own up to
    its next offset) go, and it becomes a `.log`. Returns the swapped bases."""
    swapped = []
    for path in sorted(directory.glob("*.log" + SWAP_SUFFIX)):
        stem = path.name[: -len(".log" + SWAP_SUFFIX)]
        if not _is_segment_stem(stem):
            continue
        base = int(stem)
        swap = LogSegment(directory, base, config, now_ms, suffix=SWAP_SUFFIX)
        try:
            swap.recover()
            end = swap.next_offset
        finally:
            swap.close()
        for old in segment_bases(directory):
            if base <= old < max(end, base + 1):
                for suffix in (".log", ".index", ".timeindex"):
                    (directory / f"{old:020d}{suffix}").unlink(missing_ok=True)
        finished = LogSegment(directory, base, config, now_ms, suffix=SWAP_SUFFIX)
        finished.change_suffix("")
        finished.close()
        swapped.append(base)
    return swapped


def remove_stray_files(directory: Path) -> None:
    """Files a crash can leave behind: half-written checkpoints and renamed segments."""
    for path in directory.iterdir():
        if path.name.endswith(_STRAY_SUFFIXES):
            path.unlink(missing_ok=True)


def segment_bases(directory: Path) -> list[int]:
    """Base offsets of the segments present; index files without a .log are deleted."""
    bases = sorted(int(p.stem) for p in directory.glob("*.log") if _is_segment_stem(p.stem))
    present = set(bases)
    for pattern in ("*.index", "*.timeindex"):
        for path in directory.glob(pattern):
            if _is_segment_stem(path.stem) and int(path.stem) not in present:
                path.unlink(missing_ok=True)
    return bases


def _is_segment_stem(stem: str) -> bool:
    return len(stem) == 20 and stem.isascii() and stem.isdigit()


def open_epoch_cache(
    directory: Path,
    segments: list[LogSegment],
    log_start_offset: int,
    logger: structlog.typing.FilteringBoundLogger,
) -> LeaderEpochCache:
    """Load the leader-epoch checkpoint; rebuild it from batch headers if corrupt or missing."""
    checkpoint = LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT_FILE)
    log_end_offset = segments[-1].next_offset
    try:
        cache = LeaderEpochCache(checkpoint)
        if cache.entries() or log_end_offset <= log_start_offset:
            return cache
        reason = "missing"
    except CorruptCheckpointError as exc:
        reason = str(exc)
        os.unlink(checkpoint.path)
        cache = LeaderEpochCache(checkpoint)
    logger.warning("rebuilding leader epoch cache from the log", reason=reason)
    for segment in segments:
        for _, header in segment.iter_headers(0, validate=False):
            if header.partition_leader_epoch > cache.latest_epoch():
                cache.assign(header.partition_leader_epoch, header.base_offset)
    return cache
