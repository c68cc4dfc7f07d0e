"""A partition directory's `partition.metadata` (Kafka's PartitionMetadataFile, KIP-516): the
id of the topic the log belongs to, so that a log left from a deleted topic is never taken
for a topic created again under its name.

    version: 0
    topic_id: <the id, as Kafka's Uuid.toString>

Written (fsynced, atomically) when the log first learns its topic's id. A file that cannot be
read is a storage error, as Kafka's PartitionMetadataFile.read raises KafkaStorageException:
the log is offline until the file is fixed or removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from broker.log.checkpoints import write_atomically
from broker.log.errors import LogStorageError
from protocol.topic_id import NO_TOPIC_ID, parse_topic_id

__all__ = [
    "PARTITION_METADATA_FILE",
    "CorruptPartitionMetadataError",
    "format_partition_metadata",
    "parse_partition_metadata",
    "read_topic_id",
    "write_topic_id",
]

PARTITION_METADATA_FILE: Final = "partition.metadata"
_VERSION: Final = 0


class CorruptPartitionMetadataError(LogStorageError):
    """The file is there but is not a version-0 partition.metadata."""


def format_partition_metadata(topic_id: str) -> bytes:
    parse_topic_id(topic_id)  # never write what could not be read back
    if topic_id == NO_TOPIC_ID:
        raise ValueError("partition.metadata holds a topic id; none was given")
    return f"version: {_VERSION}\ntopic_id: {topic_id}\n".encode("ascii")


def parse_partition_metadata(data: bytes, where: str = PARTITION_METADATA_FILE) -> str:
    """The topic id the file holds. Kafka's reader splits each line at ":" and whitespace,
    and takes version 0 only."""
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise CorruptPartitionMetadataError(f"{where}: not ASCII") from None
    if len(lines) != 2:
        raise CorruptPartitionMetadataError(f"{where}: {len(lines)} lines, expected 2")
    version = _field(lines[0], "version", where)
    if version != str(_VERSION):
        raise CorruptPartitionMetadataError(f"{where}: unrecognized version {version!r}")
    topic_id = _field(lines[1], "topic_id", where)
    try:
        parsed = parse_topic_id(topic_id)
    except ValueError as exc:
        raise CorruptPartitionMetadataError(f"{where}: {exc}") from None
    if topic_id == NO_TOPIC_ID or parsed.int == 0:
        raise CorruptPartitionMetadataError(f"{where}: no topic id")
    return topic_id


def _field(line: str, name: str, where: str) -> str:
    key, sep, value = line.partition(":")
    if not sep or key != name or not value[:1].isspace() or not value.strip():
        raise CorruptPartitionMetadataError(f"{where}: expected '{name}: <value>', got {line!r}")
    return value.strip()


def read_topic_id(directory: Path) -> str:
    """The id stored in `directory`, or "" when there is no file (a log from before ids, or
    one not told its id yet). OSError and CorruptPartitionMetadataError are raised."""
    path = directory / PARTITION_METADATA_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return NO_TOPIC_ID
    return parse_partition_metadata(data, str(path))


def write_topic_id(directory: Path, topic_id: str) -> None:
    write_atomically(directory / PARTITION_METADATA_FILE, format_partition_metadata(topic_id))
