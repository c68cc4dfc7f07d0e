"""Checkpoint files in Kafka's text format, written atomically and read strictly.

Format: line 1 the version `0`, line 2 the entry count, then one entry per line, fields
separated by single spaces. A write goes to a `.tmp` sibling, is fsynced and renamed over the
old file (then the directory is fsynced): a crash leaves the old file or the new one. A file
the broker cannot fully trust raises CorruptCheckpointError rather than returning partial data.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from protocol.errors import ErrorCode, HighwaterError
from protocol.topic_partition import TopicPartition

__all__ = [
    "CHECKPOINT_VERSION",
    "CorruptCheckpointError",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
    "fsync_path",
    "write_atomically",
]

CHECKPOINT_VERSION: Final = 0

# ASCII digits only: int() alone would also accept " 7", "+7", "1_0" and non-ASCII digits.
_INT = re.compile(r"-?[0-9]+")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    Data goes to `<name>.tmp`, is fsynced, renamed onto `path`, then the directory is fsynced so
    the rename itself is durable. A stale `.tmp` from an earlier crash is simply overwritten.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """fsync a file or directory by path (a directory fsync makes a rename durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CorruptCheckpointError(HighwaterError):
    """A checkpoint file that cannot be trusted; the message names the file, line and fault.

    Reported as KAFKA_STORAGE_ERROR: the log directory holding it needs attention.
    """

    code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(
        self,
        message: str,
        code: ErrorCode | None = None,
        *,
        path: Path | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message, code)
        self.path = path
        self.line = line

    @classmethod
    def at(cls, path: Path, line: int, what: str) -> CorruptCheckpointError:
        """The error for a fault at 1-based `line` of `path`."""
        return cls(f"corrupt checkpoint {path}: line {line}: {what}", path=path, line=line)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader `epoch` began at `start_offset` (the first offset written in that epoch)."""

    epoch: int
    start_offset: int


def _parse_int(path: Path, line_no: int, field: str, name: str) -> int:
    if _INT.fullmatch(field) is None:
        raise CorruptCheckpointError.at(path, line_no, f"{name} {field!r} is not an integer")
    return int(field)


def _read_entry_lines(path: Path, fields_per_entry: int) -> list[tuple[int, list[str]]] | None:
    """The entry lines of `path` as (line number, fields), after checking version and count.

    None if the file does not exist.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data:
        raise CorruptCheckpointError.at(path, 1, "file is empty, expected a version line")
    if not data.endswith(b"\n"):
        # A last line without its newline is how a truncated file looks: "20" cut to "2".
        raise CorruptCheckpointError.at(
            path, data.count(b"\n") + 1, "line is not newline-terminated (truncated file?)"
        )
    lines: list[str] = []
    # Split on b"\n" only: str.splitlines() would also split on \r, \x1c, \u2028, ...
    for line_no, raw in enumerate(data[:-1].split(b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError.at(path, line_no, f"not valid UTF-8 ({e.reason})") from e

    if lines[0] != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError.at(
            path, 1, f"unsupported version {lines[0]!r}, expected {CHECKPOINT_VERSION}"
        )
    if len(lines) < 2:
        raise CorruptCheckpointError.at(path, 2, "missing entry count line")
    count = _parse_int(path, 2, lines[1], "entry count")
    if count < 0:
        raise CorruptCheckpointError.at(path, 2, f"negative entry count {count}")
    body = lines[2:]
    if len(body) > count:
        raise CorruptCheckpointError.at(
            path, 3 + count, f"entry count says {count} entries but the file has {len(body)}"
        )
    if len(body) < count:
        raise CorruptCheckpointError.at(
            path, 3 + len(body), f"entry count says {count} entries but the file has {len(body)}"
        )

    entries: list[tuple[int, list[str]]] = []
    for line_no, line in enumerate(body, start=3):
        fields = line.split(" ")
        if len(fields) != fields_per_entry:
            raise CorruptCheckpointError.at(
                path,
                line_no,
                f"expected {fields_per_entry} fields separated by single spaces, "
                f"found {len(fields)}: {line!r}",
            )
        entries.append((line_no, fields))
    return entries


def _render(lines: Sequence[str]) -> bytes:
    header = [str(CHECKPOINT_VERSION), str(len(lines))]
    return "".join(f"{line}\n" for line in [*header, *lines]).encode("utf-8")


def _check_topic(topic: str) -> None:
    if not topic or any(c.isspace() for c in topic):
        raise ValueError(f"topic {topic!r} cannot be written to a checkpoint: empty or whitespace")


class OffsetCheckpointFile:
    """Offsets per topic-partition: `topic partition offset` lines.

    Holds replication-offset-checkpoint (high watermarks), recovery-point-offset-checkpoint and
    log-start-offset-checkpoint. Offsets are not range-checked (a sentinel -1 round-trips).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        """All entries; {} if the file does not exist. Raises CorruptCheckpointError."""
        lines = _read_entry_lines(self.path, 3)
        if lines is None:
            return {}
        result: dict[TopicPartition, int] = {}
        for line_no, (topic, partition_field, offset_field) in lines:
            if not topic or any(c.isspace() for c in topic):
                raise CorruptCheckpointError.at(self.path, line_no, f"invalid topic {topic!r}")
            partition = _parse_int(self.path, line_no, partition_field, "partition")
            if partition < 0:
                raise CorruptCheckpointError.at(
                    self.path, line_no, f"negative partition {partition}"
                )
            offset = _parse_int(self.path, line_no, offset_field, "offset")
            key = TopicPartition(topic, partition)
            if key in result:
                raise CorruptCheckpointError.at(
                    self.path, line_no, f"duplicate entry for {topic}-{partition}"
                )
            result[key] = offset
        return result

    def write(self, entries: Mapping[TopicPartition, int]) -> None:
        """Atomically replace the file; entries sorted by (topic, partition) for determinism.

        ValueError (before touching the disk) for a topic that is empty or has whitespace, or a
        negative partition: the file could not be read back.
        """
        for topic, partition in entries:
            _check_topic(topic)
            if partition < 0:
                raise ValueError(f"negative partition {partition} for topic {topic!r}")
        lines = [f"{t} {p} {offset}" for (t, p), offset in sorted(entries.items())]
        write_atomically(self.path, _render(lines))


class LeaderEpochCheckpointFile:
    """The leader-epoch-checkpoint of one partition: `epoch start_offset` lines, in file order.

    Epochs and start offsets are never negative (-1 means "undefined" to the epoch cache), so a
    negative value is corruption on read and a ValueError on write. Ordering between entries is
    the epoch cache's rule and is checked there.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[EpochEntry]:
        """All entries in file order; [] if missing. Raises CorruptCheckpointError."""
        lines = _read_entry_lines(self.path, 2)
        if lines is None:
            return []
        result: list[EpochEntry] = []
        for line_no, (epoch_field, offset_field) in lines:
            epoch = _parse_int(self.path, line_no, epoch_field, "epoch")
            start_offset = _parse_int(self.path, line_no, offset_field, "start offset")
            if epoch < 0 or start_offset < 0:
                raise CorruptCheckpointError.at(
                    self.path, line_no, f"negative epoch or start offset: {epoch} {start_offset}"
                )
            result.append(EpochEntry(epoch, start_offset))
        return result

    def write(self, entries: Sequence[EpochEntry]) -> None:
        """Atomically replace the file with `entries`, in the order given."""
        for entry in entries:
            if entry.epoch < 0 or entry.start_offset < 0:
                raise ValueError(f"negative epoch or start offset in {entry}")
        write_atomically(self.path, _render([f"{e.epoch} {e.start_offset}" for e in entries]))
