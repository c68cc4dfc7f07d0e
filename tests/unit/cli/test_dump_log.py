"""`highwater dump-log` on real segment files written by the log engine."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from broker.config.log_config import LogConfig
from broker.log.log import Log
from client.cli.main import main
from protocol.records import Record, build_batch


def write_log(directory: Path) -> Log:
    log = Log.open(directory, LogConfig(index_interval_bytes=100), now_ms=0)
    for i in range(4):
        batch = build_batch([Record(b"v%d" % i, key=b"k", timestamp_ms=1000 + i)] * 2, now_ms=0)
        log.append_as_leader(batch, leader_epoch=7, now_ms=0)
    return log


def test_dump_log_prints_batches_records_and_index(tmp_path: Path) -> None:
    log = write_log(tmp_path / "demo-0")
    log.close()
    segment = tmp_path / "demo-0" / "00000000000000000000.log"
    result = CliRunner().invoke(main, ["dump-log", "--records", str(segment)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert [line.split()[1] for line in batch_lines] == ["0", "2", "4", "6"]
    assert all("partitionLeaderEpoch: 7" in line for line in batch_lines)
    assert "| offset: 5 timestamp: 1002 key: b'k' value: b'v2' headers: []" in lines
    assert lines[-1] == f"4 valid batches, {segment.stat().st_size} valid bytes"
    index = CliRunner().invoke(main, ["dump-log", str(segment.with_suffix(".index"))])
    # 84-byte batches, an entry once more than 100 bytes were written since the last one
    assert index.output.splitlines()[1:] == ["offset: 4 position: 168"]


def test_dump_log_reports_the_first_bad_byte(tmp_path: Path) -> None:
    log = write_log(tmp_path / "demo-0")
    log.close()
    segment = tmp_path / "demo-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # a flipped byte in the last batch's records
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["dump-log", str(segment)])
    assert result.exit_code == 0
    assert "CRC-32C" in result.output
    assert result.output.splitlines()[-1].startswith("3 valid batches")
