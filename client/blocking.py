"""Blocking facades for scripts and Spark executors: the async clients on a private trio loop.

Each Blocking* object owns one daemon thread running its own `trio.run`, with the async client
opened inside it; every method hands its call to that loop with `trio.from_thread.run` and
blocks until it returns. No global state: many objects (and threads) may coexist, e.g. one per
Spark task. `close()` closes the client (the producer flushes first), stops the loop and joins
the thread (bounded by close_timeout_s). Use them as context managers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

import trio

from client.admin import (
    Admin,
    ClusterDescription,
    GroupDescription,
    GroupOffset,
    ListGroupsResult,
    TopicDescription,
)
from client.consumer import (
    Consumer,
    ConsumerRecord,
    GroupMetadata,
    OffsetAndMetadata,
    RebalanceListener,
    TopicPartition,
)
from client.consumer.commits import Offsets
from client.consumer.group_session import CommitCallback
from client.errors import ClientClosedError
from client.producer import DeliveryFuture, Producer, RecordMetadata
from protocol.errors import ErrorCode

__all__ = ["BlockingAdmin", "BlockingConsumer", "BlockingProducer"]

T = TypeVar("T")
C = TypeVar("C", bound=contextlib.AbstractAsyncContextManager[Any])


class _LoopThread(Generic[C]):
    """A daemon thread running trio with `client` entered (`async with`) until stop()."""

    def __init__(self, client: C, name: str, start_timeout_s: float = 60.0) -> None:
        self.client = client
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout_s):
            raise ClientClosedError(f"{name}: event loop did not start")
        if self._startup_error is not None:
            raise self._startup_error

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to the constructor, if it still waits
            self._startup_error = exc
        finally:
            self._closed = True
            self._ready.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with self.client:
            self._ready.set()
            await self._stop.wait()

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self._closed or self._token is None:
            raise ClientClosedError("client is closed")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed or self._token is None:
            raise ClientClosedError("client is closed")
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def stop(self, timeout_s: float) -> None:
        if self._closed:
            return
        stop = self._stop
        if stop is not None and self._token is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(stop.set, trio_token=self._token)
        self._thread.join(timeout_s)
        self._closed = True


class _Blocking(Generic[C]):
    _loop: _LoopThread[C]
    close_timeout_s = 120.0

    def close(self) -> None:
        self._loop.stop(self.close_timeout_s)

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BlockingProducer(_Blocking[Producer]):
    """Producer's methods, blocking. `send` returns a concurrent.futures.Future."""

    def __init__(self, bootstrap: str | Sequence[str], **config: Any) -> None:
        self._loop = _LoopThread(Producer(bootstrap, **config), "highwater-producer")

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; `.result(timeout)` on the returned future waits for the ack."""
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()

        def on_done(fut: DeliveryFuture) -> None:
            error = fut.exception()
            if error is not None:
                result.set_exception(error)
            else:
                result.set_result(fut.result())

        async def send_and_watch() -> None:
            fut = await self._loop.client.send(
                topic, value, key, partition, tuple(headers), timestamp_ms
            )
            fut.add_done_callback(on_done)

        self._loop.run(send_and_watch)
        return result

    def flush(self, timeout_ms: float | None = None) -> None:
        self._loop.run(self._loop.client.flush, timeout_ms)

    def partitions_for(self, topic: str) -> tuple[int, ...]:
        return self._loop.run(self._loop.client.partitions_for, topic)

    def metrics(self) -> dict[str, float]:
        return self._loop.run_sync(self._loop.client.metrics)


class _ThreadedListener(RebalanceListener):
    """A rebalance listener with plain (blocking) methods, each run in a worker thread while
    poll() waits for it, so it may call the BlockingConsumer back (e.g. commit())."""

    def __init__(self, listener: object) -> None:
        self._listener = listener

    async def on_partitions_revoked(self, partitions: set[Any]) -> None:
        await self._call("on_partitions_revoked", partitions)

    async def on_partitions_assigned(self, partitions: set[Any]) -> None:
        await self._call("on_partitions_assigned", partitions)

    async def on_partitions_lost(self, partitions: set[Any]) -> None:
        await self._call("on_partitions_lost", partitions)

    async def _call(self, name: str, partitions: set[Any]) -> None:
        method = getattr(self._listener, name, None)
        if method is None and name == "on_partitions_lost":
            method = getattr(self._listener, "on_partitions_revoked", None)
        if method is not None:
            await trio.to_thread.run_sync(method, partitions)


class BlockingConsumer(_Blocking[Consumer]):
    def __init__(self, bootstrap: str | Sequence[str], **config: Any) -> None:
        self._loop = _LoopThread(Consumer(bootstrap, **config), "highwater-consumer")

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._loop.run_sync(self._loop.client.assign, list(partitions))

    def subscribe(
        self, topics: Iterable[str] | re.Pattern[str], *, listener: object | None = None
    ) -> None:
        """As Consumer.subscribe; `listener` has plain methods on_partitions_revoked /
        _assigned / _lost (any of them), called inside poll() from a worker thread."""
        wanted = topics if isinstance(topics, re.Pattern | str) else list(topics)
        threaded = None if listener is None else _ThreadedListener(listener)

        def subscribe() -> None:
            self._loop.client.subscribe(wanted, listener=threaded)

        self._loop.run_sync(subscribe)

    def commit(self, offsets: Offsets | None = None, *, timeout_ms: float | None = None) -> None:
        async def call() -> None:
            await self._loop.client.commit(offsets, timeout_ms=timeout_ms)

        self._loop.run(call)

    def commit_async(
        self, offsets: Offsets | None = None, callback: CommitCallback | None = None
    ) -> None:
        """As Consumer.commit_async; `callback` runs on the consumer's event-loop thread."""
        self._loop.run_sync(self._loop.client.commit_async, offsets, callback)

    def committed(
        self, partitions: Iterable[tuple[str, int]], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        async def call() -> dict[TopicPartition, OffsetAndMetadata | None]:
            return await self._loop.client.committed(list(partitions), timeout_ms=timeout_ms)

        return self._loop.run(call)

    def group_metadata(self) -> GroupMetadata | None:
        return self._loop.run_sync(self._loop.client.group_metadata)

    def unsubscribe(self) -> None:
        self._loop.run_sync(self._loop.client.unsubscribe)

    def assignment(self) -> set[TopicPartition]:
        return self._loop.run_sync(self._loop.client.assignment)

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        self._loop.run_sync(self._loop.client.seek, partition, offset)

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        self._loop.run_sync(self._loop.client.seek_to_beginning, _listed(partitions))

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        self._loop.run_sync(self._loop.client.seek_to_end, _listed(partitions))

    def seek_to_timestamp(
        self, timestamp_ms: int, partitions: Iterable[tuple[str, int]] | None = None
    ) -> None:
        self._loop.run_sync(self._loop.client.seek_to_timestamp, timestamp_ms, _listed(partitions))

    def position(self, partition: tuple[str, int]) -> int:
        return self._loop.run(self._loop.client.position, partition)

    def highwater(self, partition: tuple[str, int]) -> int | None:
        return self._loop.run_sync(self._loop.client.highwater, partition)

    def lag(self) -> dict[TopicPartition, int]:
        return self._loop.run_sync(self._loop.client.lag)

    def metrics(self) -> dict[str, float]:
        return self._loop.run_sync(self._loop.client.metrics)

    def poll(
        self, timeout_ms: float = 1_000, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        return self._loop.run(self._loop.client.poll, timeout_ms, max_records)

    def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._loop.run(self._loop.client.end_offsets, list(partitions), timeout_ms)

    def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._loop.run(self._loop.client.beginning_offsets, list(partitions), timeout_ms)

    def offsets_for_times(
        self, timestamps: dict[tuple[str, int], int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        return self._loop.run(self._loop.client.offsets_for_times, dict(timestamps), timeout_ms)

    def partitions_for(self, topic: str) -> tuple[int, ...]:
        return self._loop.run(self._loop.client.partitions_for, topic)


class BlockingAdmin(_Blocking[Admin]):
    def __init__(self, bootstrap: str | Sequence[str], **config: Any) -> None:
        self._loop = _LoopThread(Admin(bootstrap, **config), "highwater-admin")

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> None:
        async def call() -> None:
            await self._loop.client.create_topic(
                name,
                partitions,
                replication_factor,
                config,
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            )

        self._loop.run(call)

    def delete_topic(self, name: str, *, timeout_ms: int | None = None) -> None:
        async def call() -> None:
            await self._loop.client.delete_topic(name, timeout_ms=timeout_ms)

        self._loop.run(call)

    def list_topics(self) -> list[str]:
        return self._loop.run(self._loop.client.list_topics)

    def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        return self._loop.run(self._loop.client.describe_topics, _listed(names))

    def describe_cluster(self) -> ClusterDescription:
        return self._loop.run(self._loop.client.describe_cluster)

    def list_groups(self, states: Iterable[str] = ()) -> ListGroupsResult:
        return self._loop.run(self._loop.client.list_groups, list(states))

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        return self._loop.run(self._loop.client.describe_groups, list(group_ids))

    def list_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> list[GroupOffset]:
        return self._loop.run(self._loop.client.list_group_offsets, group_id, _listed(partitions))

    def alter_group_offsets(self, group_id: str, offsets: Offsets) -> None:
        self._loop.run(self._loop.client.alter_group_offsets, group_id, offsets)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        return self._loop.run(self._loop.client.delete_groups, list(group_ids))

    def delete_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> dict[TopicPartition, ErrorCode]:
        return self._loop.run(self._loop.client.delete_group_offsets, group_id, list(partitions))


def _listed(items: Iterable[T] | None) -> list[T] | None:
    return None if items is None else list(items)
