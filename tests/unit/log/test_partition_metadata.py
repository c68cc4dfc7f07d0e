"""partition.metadata (Kafka's PartitionMetadataFile, KIP-516): its format, what is refused
when reading it, and a log that stores, reloads and cannot read its topic id."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.manager import LogManager
from broker.log.partition_metadata import (
    PARTITION_METADATA_FILE,
    CorruptPartitionMetadataError,
    format_partition_metadata,
    parse_partition_metadata,
    read_topic_id,
)
from protocol.errors import ErrorCode
from protocol.topic_id import from_uuid
from protocol.topic_partition import TopicPartition
from tests.unit.log.helpers import T0, make_batch, open_log

TOPIC_ID = from_uuid(uuid.UUID("0123456789abcdef0123456789abcdef"))
TP = TopicPartition("t", 0)


def test_the_file_is_kafkas_two_lines() -> None:
    data = format_partition_metadata(TOPIC_ID)
    assert data == f"version: 0\ntopic_id: {TOPIC_ID}\n".encode()
    assert parse_partition_metadata(data) == TOPIC_ID


def test_kafkas_reader_takes_any_whitespace_after_the_colon() -> None:
    assert parse_partition_metadata(f"version:  0\ntopic_id:\t{TOPIC_ID}".encode()) == TOPIC_ID


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"version: 0\n",
        f"version: 1\ntopic_id: {TOPIC_ID}\n".encode(),
        f"version:0\ntopic_id: {TOPIC_ID}\n".encode(),
        f"topic_id: {TOPIC_ID}\nversion: 0\n".encode(),
        b"version: 0\ntopic_id: not-an-id\n",
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",  # the zero UUID: no id
        b"version: 0\ntopic_id: \n",
        f"version: 0\ntopic_id: {TOPIC_ID}\nextra: 1\n".encode(),
        b"version: 0\ntopic_id: \xff\n",
    ],
)
def test_a_file_that_is_not_version_0_with_an_id_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptPartitionMetadataError) as info:
        parse_partition_metadata(data)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_no_id_is_never_written() -> None:
    with pytest.raises(ValueError):
        format_partition_metadata("")
    with pytest.raises(ValueError):
        format_partition_metadata("not-an-id")


def test_a_log_stores_its_topic_id_and_reads_it_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.topic_id == ""  # a new log, or one from before ids
    assert read_topic_id(tmp_path / "t-0") == ""
    log.append_as_leader(make_batch(2), 0, T0)
    log.assign_topic_id(TOPIC_ID)
    assert (tmp_path / "t-0" / PARTITION_METADATA_FILE).read_bytes() == (
        format_partition_metadata(TOPIC_ID)
    )
    log.close()
    reopened = open_log(tmp_path / "t-0")
    assert reopened.topic_id == TOPIC_ID
    assert reopened.log_end_offset == 2
    reopened.close()


def test_a_corrupt_file_takes_only_its_log_offline_at_start(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    for tp in (TP, TopicPartition("t", 1)):
        log = manager.get_or_create_log(tp, T0)
        log.assign_topic_id(TOPIC_ID)
    manager.shutdown(T0)
    (tmp_path / "t-0" / PARTITION_METADATA_FILE).write_bytes(b"version: 7\n")
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)  # does not raise: the broker starts
    assert list(manager.offline_logs) == [TP]
    assert "partition.metadata" in manager.offline_logs[TP]
    assert list(manager.logs) == [TopicPartition("t", 1)]
    assert manager.logs[TopicPartition("t", 1)].topic_id == TOPIC_ID
    assert not manager.offline_dirs
    manager.shutdown(T0)
