"""The log cleaner, trio shell: `log.cleaner.threads` loops, each asking
`core.cleaning_pass` for the filthiest log (`core.cleaner_manager.CleanerManager`), cleaning it
in a child process (`broker.log.cleaner.clean` reads and writes files only, so produce and
fetch never wait on its CPU) and swapping the result in (`core.cleaning_pass.finish_cleaning`)
on the broker's own thread. A child stops when the broker does, or when it finds itself
orphaned."""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

import structlog
import trio

from broker.core.cleaner_manager import CleanerManager
from broker.core.cleaning_pass import (
    CleaningOutcome,
    choose_cleaning,
    cleaning_failed,
    finish_cleaning,
)
from broker.log.cleaner import CleaningResult, CleaningTask, clean
from protocol.errors import HighwaterError

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.log.manager import LogManager

__all__ = ["BYTES_PER_MAP_KEY", "CleaningFailed", "LogCleaner"]

BYTES_PER_MAP_KEY = 128  # what one key of the key -> offset map costs, roughly (a dict entry)
CLEANER_NICENESS = 10  # added to the cleaning process's nice value


class LogCleaner:
    def __init__(self, ctx: BrokerContext, log_manager: LogManager) -> None:
        self._ctx = ctx
        self.manager = CleanerManager(log_manager.read_cleaned())
        config = ctx.config
        self._threads = config.log_cleaner_threads
        self._backoff_s = config.log_cleaner_backoff_ms / 1000
        self._max_map_keys = max(1, config.log_cleaner_dedupe_buffer_size // BYTES_PER_MAP_KEY)
        self._log = structlog.get_logger("highwater.cleaner")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(self._threads):
                nursery.start_soon(self._loop)
            task_status.started()

    async def _loop(self) -> None:
        while True:
            if not await self.clean_once():
                await trio.sleep(self._backoff_s)

    async def clean_once(self) -> bool:
        """Clean the filthiest log, if one is due; True if one was cleaned."""
        replica_manager = self._ctx.replica_manager
        now_ms = self._ctx.wall_ms()
        chosen = choose_cleaning(self.manager, replica_manager, now_ms)
        if chosen is None:
            return False
        candidate, log = chosen
        tp = candidate.tp
        started = time.monotonic()
        task = log.cleaning_task(
            candidate.first_dirty_offset, candidate.end_offset, now_ms, self._max_map_keys
        )
        result = await _clean_in_child(task)
        if isinstance(result, CleaningFailed):
            outcome = cleaning_failed(self.manager, tp, corrupt=result.corrupt)
            if outcome is CleaningOutcome.CORRUPT:
                self._log.error(outcome.value, topic=tp[0], partition=tp[1], error=result.message)
            else:
                self._log.warning(outcome.value, topic=tp[0], partition=tp[1], error=result.message)
            return False
        outcome = finish_cleaning(
            self.manager, replica_manager, tp, log, task, result, self._ctx.wall_ms()
        )
        if outcome is not CleaningOutcome.CLEANED:
            if outcome is CleaningOutcome.VOIDED:
                self._log.info(outcome.value, topic=tp[0], partition=tp[1])
            return True
        elapsed_s = max(time.monotonic() - started, 1e-6)
        self._log.info(
            "log cleaned",
            topic=tp[0],
            partition=tp[1],
            dirty_ratio=round(candidate.dirty_ratio, 3),
            end_offset=result.end_offset,
            records_read=result.records_read,
            records_kept=result.records_kept,
            mb_read=round(result.bytes_read / 1e6, 3),
            mb_written=round(result.bytes_written / 1e6, 3),
            mb_per_s=round(result.bytes_read / 1e6 / elapsed_s, 2),
        )
        return True


@dataclass(frozen=True, slots=True)
class CleaningFailed:
    message: str
    corrupt: bool  # a bad batch or record (CORRUPT_MESSAGE, INVALID_RECORD), not an IO error


async def _clean_in_child(task: CleaningTask) -> CleaningResult | CleaningFailed:
    """Run `clean(task)` in a child process ("spawn": it must not inherit the broker's trio
    loop, sockets or locks); terminated if the broker cancels the wait."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(task, os.getpid(), send), daemon=True)
    child.start()
    send.close()
    try:
        return await trio.to_thread.run_sync(_receive, receive, abandon_on_cancel=True)
    finally:
        if child.is_alive():
            child.terminate()
        with trio.CancelScope(shield=True):  # reap it even when the broker is stopping
            await trio.to_thread.run_sync(child.join)
        receive.close()


def _receive(connection: Connection) -> CleaningResult | CleaningFailed:
    try:
        received: CleaningResult | CleaningFailed = connection.recv()
    except EOFError:
        return CleaningFailed("the cleaner process died", corrupt=False)
    return received


def _child_main(task: CleaningTask, parent_pid: int, connection: Connection) -> None:
    # Below the broker's priority: on a busy machine produce and fetch go first and the
    # cleaning takes the spare CPU (Kafka's cleaner threads compete with request handlers).
    os.nice(CLEANER_NICENESS)
    outcome: CleaningResult | CleaningFailed
    try:
        outcome = clean(task, parent_pid=parent_pid)
    except HighwaterError as exc:
        outcome = CleaningFailed(str(exc), corrupt=True)
    except Exception as exc:
        outcome = CleaningFailed(repr(exc), corrupt=False)
    try:
        connection.send(outcome)
    except OSError:
        pass  # the broker is gone (killed, or it cancelled the wait): nobody to tell
    finally:
        connection.close()
