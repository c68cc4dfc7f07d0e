"""The leader epoch cache: which leader epoch started at which offset (Kafka's
LeaderEpochFileCache).

Followers ask the leader for the end offset of their latest epoch (OffsetsForLeaderEpoch,
KIP-101/KIP-279) and truncate to it, instead of trusting their high watermark, which can lose or
diverge records across leader changes. Entries are kept strictly increasing in both epoch and
start offset; every change is checkpointed before it becomes visible, so memory never claims
more than the disk holds.
"""

from __future__ import annotations

import bisect
from typing import Final

from broker.log.checkpoints import CorruptCheckpointError, EpochEntry, LeaderEpochCheckpointFile

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LeaderEpochCache"]

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class LeaderEpochCache:
    """Epoch entries of one partition, optionally backed by its leader-epoch-checkpoint file."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None = None) -> None:
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        # The newest entry, or None: read-only for callers (Log.append_as_leader reads it per
        # append to skip assign() when the epoch is unchanged). Set wherever _entries is.
        self.latest: EpochEntry | None = None
        if checkpoint is not None:
            entries = checkpoint.read()
            for i in range(1, len(entries)):
                prev, cur = entries[i - 1], entries[i]
                if cur.epoch <= prev.epoch or cur.start_offset <= prev.start_offset:
                    # Entry i is on line i + 3 (after the version and count lines).
                    raise CorruptCheckpointError.at(
                        checkpoint.path,
                        i + 3,
                        f"entry (epoch {cur.epoch}, start offset {cur.start_offset}) does not "
                        f"follow (epoch {prev.epoch}, start offset {prev.start_offset}): "
                        "entries must be strictly increasing in epoch and start offset",
                    )
            self._entries = entries
            self.latest = entries[-1] if entries else None

    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, ascending."""
        return list(self._entries)

    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def latest_entry(self) -> EpochEntry | None:
        return self.latest

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (on becoming leader, or on appending a
        batch whose partition leader epoch is new).

        A repeat of the latest epoch at a later offset is a no-op. Otherwise every entry that
        would break monotonicity (epoch >= `epoch` or start offset >= `start_offset`) is dropped
        from the end first: those epochs' records have been truncated away.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(
                f"epoch and start offset must be non-negative, got {epoch} and {start_offset}"
            )
        latest = self.latest
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return
        kept = list(self._entries)
        while kept and (kept[-1].epoch >= epoch or kept[-1].start_offset >= start_offset):
            kept.pop()
        kept.append(EpochEntry(epoch, start_offset))
        self._replace(kept)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for an OffsetsForLeaderEpoch request (KIP-279).

        The end offset of an epoch is the start offset of the next higher epoch, or the log end
        offset for the latest epoch. For an epoch this log never had, answer with the largest
        smaller epoch it did have, so the follower truncates to where the logs diverge.
        (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) when there is no answer.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(self._entries, requested_epoch, key=lambda e: e.epoch)
        if i == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[i]
        if i == 0:
            return requested_epoch, higher.start_offset
        return self._entries[i - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in; None if before the first entry."""
        i = bisect.bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return self._entries[i - 1].epoch if i > 0 else None

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset`: the log was truncated to it, or on
        recovery, entries past the log end offset.
        """
        latest = self.latest_entry()
        if end_offset < 0 or latest is None or latest.start_offset < end_offset:
            return
        self._replace([e for e in self._entries if e.start_offset < end_offset])

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start offset advanced to `start_offset` (retention, DeleteRecords).

        Entries starting at or before it are dropped, but the last of them is kept moved to
        `start_offset`: its epoch still covers the records from there on.
        """
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        kept = [EpochEntry(removed[-1].epoch, start_offset)]
        kept += self._entries[len(removed) :]
        if kept != self._entries:
            self._replace(kept)

    def clear(self) -> None:
        """Drop every entry and checkpoint the empty cache (the partition's log was deleted or
        fully truncated).
        """
        self._replace([])

    def flush(self) -> None:
        """Write the entries to the checkpoint file, if there is one."""
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)

    def _replace(self, entries: list[EpochEntry]) -> None:
        # Write first: if the write fails, memory still matches the file on disk.
        if self._checkpoint is not None:
            self._checkpoint.write(entries)
        self._entries = entries
        self.latest = entries[-1] if entries else None
