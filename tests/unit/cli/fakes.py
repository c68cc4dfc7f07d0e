"""Fake producer, consumer and metadata for the CLI tests (no broker)."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

import pytest
from click.testing import CliRunner

from client.cli import consume as cli_consume
from client.cli import produce as cli_produce
from client.cli.main import main
from client.consumer import ConsumerRecord, TopicPartition
from client.errors import ClientClosedError, HighwaterClientError
from client.producer import RecordMetadata, RetryNotice
from protocol.errors import ErrorCode

__all__ = [
    "FakeConsumer",
    "FakeGroupConsumer",
    "FakeMetadata",
    "FakeProducer",
    "consumer",
    "group_consumer",
    "producer",
    "run",
]


class FakeFuture:
    def __init__(self, metadata: RecordMetadata | None, error: HighwaterClientError | None) -> None:
        self._metadata = metadata
        self._error = error

    def done(self) -> bool:
        return True

    def result(self) -> RecordMetadata:
        if self._error is not None:
            raise self._error
        assert self._metadata is not None
        return self._metadata

    async def wait(self) -> RecordMetadata:
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()


class FakeMetadata:
    """The cluster's topics (any other topic does not exist), as client.metadata answers."""

    def __init__(self, topics: dict[str, tuple[int, ...]]) -> None:
        self.known = topics
        self.interest: set[str] = set()

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted(self.known))

    def add_topics(self, topics: Iterable[str]) -> None:
        self.interest |= set(topics)

    async def refresh(self, topics: object = None, *, all_topics: bool = False) -> None:
        pass

    def topic_error(self, topic: str) -> int:
        return 0 if topic in self.known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> tuple[int, ...]:
        return self.known[topic]


class FakeProducer:
    """Acknowledges every record at the next offset of partition 0, except values b"fail";
    b"retry" is acknowledged after one notice to the on_retry hook; b"aborted" and b"in doubt"
    fail as the producer's close fails records never sent and records in flight."""

    instances: list[FakeProducer] = []

    def __init__(self, bootstrap: str, **options: Any) -> None:
        self.bootstrap = bootstrap
        self.options = options
        self.sent: list[dict[str, Any]] = []
        self.metadata = FakeMetadata({"t": (0, 1, 2, 3), "dst": (0,)})
        FakeProducer.instances.append(self)

    async def __aenter__(self) -> FakeProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def send(self, topic: str, value: bytes | None, **kwargs: Any) -> FakeFuture:
        if value == b"refuse":  # refused by send itself, as a record over max.request.size
            raise HighwaterClientError("MESSAGE_TOO_LARGE: a record", ErrorCode.MESSAGE_TOO_LARGE)
        self.sent.append({"topic": topic, "value": value, **kwargs})
        if value == b"retry":
            self.options["on_retry"](RetryNotice(topic, 0, "LEADER_NOT_AVAILABLE", 1, 5_000.0))
        if value == b"fail":
            error = HighwaterClientError("MESSAGE_TOO_LARGE: too big", ErrorCode.MESSAGE_TOO_LARGE)
            return FakeFuture(None, error)
        if value in (b"aborted", b"in doubt"):
            closed = ClientClosedError(f"closed: {value.decode()}", in_doubt=value == b"in doubt")
            return FakeFuture(None, closed)
        offset = len(self.sent) - 1
        return FakeFuture(RecordMetadata(topic, kwargs.get("partition") or 0, offset, 0), None)

    async def flush(self) -> None:
        pass

    async def aclose(self, timeout_ms: float | None = None) -> None:
        pass


def _records() -> list[ConsumerRecord]:
    return [
        ConsumerRecord("t", 0, 0, 1000, b"k0", b"v0", (("h", b"1"),)),
        ConsumerRecord("t", 1, 0, 1001, None, b"\xff"),
        ConsumerRecord("t", 0, 1, 1002, b"k1", None),
        ConsumerRecord("t2", 0, 0, 1003, None, b"other topic"),
    ]


class FakeConsumer:
    """Serves _records() one per poll; end offsets are where those records end."""

    last: FakeConsumer | None = None

    def __init__(self, bootstrap: str, **options: Any) -> None:
        self.options = options
        self.pending = _records()
        self.positions: dict[TopicPartition, int] = {}
        self.resets: list[str] = []
        self.metadata = FakeMetadata({"t": (0, 1), "t2": (0,), "other": (0,)})
        FakeConsumer.last = self

    async def __aenter__(self) -> FakeConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def assign(self, tps: Iterable[tuple[str, int]]) -> None:
        self.assigned = [TopicPartition(*tp) for tp in tps]
        self.pending = [r for r in self.pending if (r.topic, r.partition) in self.assigned]
        self.positions = {tp: self.positions.get(tp, 0) for tp in self.assigned}

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def seek_to_timestamp(self, timestamp_ms: int, tps: Iterable[tuple[str, int]]) -> None:
        self.resets.append(f"timestamp {timestamp_ms}")

    async def beginning_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        return dict.fromkeys((TopicPartition(*tp) for tp in tps), 0)

    async def offsets_for_times(
        self, timestamps: dict[tuple[str, int], int]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        found: dict[TopicPartition, tuple[int, int] | None] = {}
        for tp, ts in timestamps.items():
            at = [r for r in _records() if (r.topic, r.partition) == tp and r.timestamp >= ts]
            found[TopicPartition(*tp)] = (at[0].offset, at[0].timestamp) if at else None
        return found

    def seek_to_beginning(self, tps: Iterable[tuple[str, int]]) -> None:
        self.resets.append("beginning")

    def seek_to_end(self, tps: Iterable[tuple[str, int]]) -> None:
        self.resets.append("end")

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        self.resets.append(f"offset {offset}")

    async def end_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        ends = dict.fromkeys((TopicPartition(*tp) for tp in tps), 0)
        for r in _records():
            if TopicPartition(r.topic, r.partition) in ends:
                ends[TopicPartition(r.topic, r.partition)] = r.offset + 1
        return ends

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def poll(self, timeout_ms: float, max_records: int) -> list[ConsumerRecord]:
        if not self.pending:
            return []
        record = self.pending.pop(0)
        self.positions[TopicPartition(record.topic, record.partition)] = record.offset + 1
        return [record]


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> type[FakeProducer]:
    FakeProducer.instances = []
    monkeypatch.setattr(cli_produce, "Producer", FakeProducer)
    return FakeProducer


def run(args: list[str], stdin: bytes | str = b"", env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, args, input=stdin, env=env)


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> type[FakeConsumer]:
    monkeypatch.setattr(cli_consume, "Consumer", FakeConsumer)
    return FakeConsumer


class FakeGroupConsumer(FakeConsumer):
    """A group member of the fake: partitions t-0 and t-1 are assigned at the first poll
    (listener called), the records of _records() come one per poll, commits are recorded."""

    last_group: FakeGroupConsumer | None = None

    def __init__(self, bootstrap: str, **options: Any) -> None:
        super().__init__(bootstrap, **options)
        self.auto_commit_interval_ms = options.get("auto_commit_interval_ms", 5_000)
        self.default_api_timeout_ms = options.get("default_api_timeout_ms", 60_000)
        self.listener: Any = None
        self.assigned = []
        self.commits: list[dict[tuple[str, int], int]] = []
        self.subscribed: object = None
        FakeGroupConsumer.last_group = self

    def subscribe(self, topics: object, *, listener: Any = None) -> None:
        self.subscribed = topics
        self.listener = listener

    def group_metadata(self) -> Any:
        from client.consumer import GroupMetadata

        state = "stable" if self.assigned else "joining"
        return GroupMetadata("g", "m-1", 1, None, state)

    async def poll(self, timeout_ms: float, max_records: int) -> list[ConsumerRecord]:
        if not self.assigned:
            self.assigned = [TopicPartition("t", 0), TopicPartition("t", 1)]
            self.positions = dict.fromkeys(self.assigned, 0)
            self.pending = [r for r in _records() if r.topic == "t"]
            await self.listener.on_partitions_assigned(set(self.assigned))
            return []
        return await super().poll(timeout_ms, max_records)

    async def commit(self, offsets: dict[tuple[str, int], int], *, timeout_ms: float) -> None:
        self.commits.append(dict(offsets))


@pytest.fixture
def group_consumer(monkeypatch: pytest.MonkeyPatch) -> type[FakeGroupConsumer]:
    monkeypatch.setattr(cli_consume, "Consumer", FakeGroupConsumer)
    return FakeGroupConsumer
