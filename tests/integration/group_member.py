"""One consumer group member as its own process, for test_group_members.py: it consumes a topic
in a group, commits after processing (auto-commit off) and logs, as JSON lines with
time.monotonic() (one clock for every process of the machine) and wall time, what it owns
(its rebalance listener), what it processed and what it committed, to --log.

`python -m tests.integration.group_member --bootstrap B --topic T --group G --log FILE ...`.
SIGTERM: it stops consuming, closes and leaves the group. With --stop-trigger PATH: once that
file exists, it SIGSTOPs itself after processing a batch and before committing it (then
removes the file): a deterministic late commit. --process-ms: how long processing a batch
takes (a window between processing and committing).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import trio

from client.consumer import Consumer, RebalanceListener, TopicPartition
from client.errors import HighwaterClientError

__all__ = ["main"]


class Journal:
    """Flushed JSON lines: a SIGKILL loses nothing written before it."""

    def __init__(self, out: IO[str], name: str) -> None:
        self.out = out
        self.name = name
        self.consumer: Consumer | None = None

    def write(self, event: str, **fields: Any) -> None:
        meta = self.consumer.group_metadata() if self.consumer is not None else None
        line = {
            "t": time.monotonic(),
            "wall": time.time(),
            "member": self.name,
            "pid": os.getpid(),
            "member_id": meta.member_id if meta is not None else "",
            "epoch": meta.member_epoch if meta is not None else -1,
            "event": event,
            **fields,
        }
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()


def _partitions(partitions: Iterable[TopicPartition]) -> list[int]:
    return sorted(tp.partition for tp in partitions)


class Listener(RebalanceListener):
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def on_partitions_assigned(self, partitions: set[Any]) -> None:
        self.journal.write("assigned", partitions=_partitions(partitions))

    async def on_partitions_revoked(self, partitions: set[Any]) -> None:
        self.journal.write("revoked", partitions=_partitions(partitions))

    async def on_partitions_lost(self, partitions: set[Any]) -> None:
        self.journal.write("lost", partitions=_partitions(partitions))


async def run(args: argparse.Namespace, journal: Journal) -> None:
    journal.write("started")
    async with Consumer(
        args.bootstrap,
        client_id=args.name,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_poll_records=200,
    ) as consumer:
        journal.consumer = consumer
        consumer.subscribe([args.topic], listener=Listener(journal))
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_consume, args, journal, consumer)
                async for _ in signals:  # SIGTERM: stop consuming, then close (leave)
                    nursery.cancel_scope.cancel()
                    break
    journal.consumer = None
    journal.write("closed")


async def _consume(args: argparse.Namespace, journal: Journal, consumer: Consumer) -> None:
    trigger = Path(args.stop_trigger) if args.stop_trigger else None
    while True:
        records = await consumer.poll(100)
        if not records:
            continue
        offsets: dict[TopicPartition, int] = {}
        by_partition: dict[int, list[bytes]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append(r.value or b"")
            offsets[TopicPartition(r.topic, r.partition)] = r.offset + 1
        for p, values in sorted(by_partition.items()):
            journal.write(
                "processed",
                partition=p,
                next_offset=offsets[TopicPartition(args.topic, p)],
                values=[v.decode() for v in values],
            )
        await trio.sleep(args.process_ms / 1000)  # what processing takes, before the commit
        committing = {tp.partition: o for tp, o in offsets.items()}
        if trigger is not None and trigger.exists():
            trigger.unlink()
            journal.write("stopping", offsets=committing)
            os.kill(os.getpid(), signal.SIGSTOP)
            journal.write("continued", offsets=committing)
        journal.write("committing", offsets=committing)
        try:
            await consumer.commit(offsets)
        except HighwaterClientError as exc:
            code = exc.code.name if exc.code is not None else None
            journal.write(
                "commit_failed",
                offsets=committing,
                error=type(exc).__name__,
                code=code,
                message=str(exc),
            )
        else:
            journal.write("committed", offsets=committing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--stop-trigger")
    parser.add_argument("--process-ms", type=int, default=0)
    args = parser.parse_args()
    with Path(args.log).open("a") as out:
        trio.run(run, args, Journal(out, args.name))


if __name__ == "__main__":
    main()
