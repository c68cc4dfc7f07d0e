"""A consumer that meets an unreadable batch (docs/reliability.md, "No poison batches"), with a real
broker in-process, the real consumer and the `highwater consume` CLI: the leader refuses such
batches now, so the log gets them here as it could before: one damaged on disk (a byte of a value
flipped in the segment file under the running broker: its CRC no longer matches) and one an older
version stored (an int key, valid CRC, appended as a follower append does). Each read returns the
records before the batch, then names topic, partition and offset; seeking (or the CLI's `-o`) to the
offset it gives reads on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from client.consumer import Consumer, ConsumerRecord
from client.errors import CorruptBatchError
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, iter_batch_headers
from protocol.topic_partition import TopicPartition
from tests.integration.test_broker_handlers import (
    Broker,
    batch,
    produce,
    produce_result,
    running_broker,
)

pytestmark = pytest.mark.integration

DEADLINE_S = 20


async def _append(broker: Broker, records: bytes) -> int:
    result = produce_result(await broker.conn.request(produce(records)))
    assert result.error_code == ErrorCode.NONE, result
    return result.base_offset


async def _poll_until_error(consumer: Consumer) -> tuple[list[ConsumerRecord], CorruptBatchError]:
    got: list[ConsumerRecord] = []
    with trio.fail_after(DEADLINE_S):
        while True:
            try:
                got += await consumer.poll(timeout_ms=200)
            except CorruptBatchError as exc:
                return got, exc


async def _cli_consume(broker: Broker, *offsets: str) -> subprocess.CompletedProcess[bytes]:
    args = ["consume", "t", "--partition", "0", "-e", "-b", f"127.0.0.1:{broker.server.port}"]
    return await trio.run_process(
        [sys.executable, "-m", "client.cli", *args, *(a for o in offsets for a in ("-o", o))],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


async def test_a_consumer_reads_around_unreadable_batches(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0)
        assert await _append(broker, batch(b"v0", b"v1")) == 0
        assert await _append(broker, batch(b"v2", b"v3", b"v4")) == 2
        assert await _append(broker, batch(b"v5")) == 5
        log = broker.ctx.replica_manager.partitions[TopicPartition("t", 0)].log
        segment = tmp_path / "t-0" / "00000000000000000000.log"
        data = bytearray(segment.read_bytes())
        (_, _), (second, header), _ = iter_batch_headers(bytes(data))
        assert header.base_offset == 2
        value_at = data.index(b"v3", second)
        with segment.open("r+b") as f:  # damage on disk, under the running broker
            f.seek(value_at)
            f.write(b"X")
        older = build_batch([Record(b"v6", key=123)], base_offset=6)  # type: ignore[arg-type]
        log.append_as_follower(older, 0)  # as an older leader stored it: valid CRC, int key
        assert await _append(broker, batch(b"v7")) == 7

        async with Consumer(f"127.0.0.1:{broker.server.port}") as consumer:
            consumer.assign([("t", 0)])
            consumer.seek(("t", 0), 0)
            got, error = await _poll_until_error(consumer)
            assert [r.value for r in got] == [b"v0", b"v1"]
            assert (error.topic, error.partition, error.offset, error.next_offset) == ("t", 0, 2, 5)
            assert "CRC" in error.reason
            consumer.seek(("t", 0), error.next_offset)
            got, error = await _poll_until_error(consumer)
            assert [r.value for r in got] == [b"v5"]
            assert (error.offset, error.next_offset) == (6, 7)
            consumer.seek(("t", 0), error.next_offset)
            with trio.fail_after(DEADLINE_S):
                while not (got := list(await consumer.poll(timeout_ms=200))):
                    pass
            assert [(r.offset, r.value) for r in got] == [(7, b"v7")]

        first = await _cli_consume(broker, "beginning")
        assert first.returncode == 1
        assert first.stdout == b"v0\nv1\n"
        stderr = first.stderr.decode()
        assert "CORRUPT_MESSAGE: t-0: the batch at offset 2 cannot be read" in stderr
        assert "To skip it: highwater consume t --partition 0 -o 5" in stderr
        assert "Traceback" not in stderr
        second_run = await _cli_consume(broker, "5")
        assert second_run.returncode == 1
        assert second_run.stdout == b"v5\n"
        assert "To skip it: highwater consume t --partition 0 -o 7" in second_run.stderr.decode()
        last = await _cli_consume(broker, "7")
        assert (last.returncode, last.stdout) == (0, b"v7\n"), last.stderr.decode()
