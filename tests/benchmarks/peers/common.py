"""What every peer module shares: the workload, one run's figures, server CPU from /proc."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from client.cli.perf_tools import payload

T = TypeVar("T")


@dataclass(frozen=True)
class Workload:
    records: int = 300_000  # produce, then consume, this many
    record_size: int = 100  # bytes of value
    rate: int = 10_000  # end-to-end: records/s
    duration_s: float = 20.0  # end-to-end: this long
    timeout_s: float = 180.0  # any one measure

    @property
    def e2e_records(self) -> int:
        return int(self.rate * self.duration_s)

    def value(self) -> bytes:
        return payload(self.record_size)

    def filler(self) -> bytes:
        """The end-to-end value after its 8-byte sequence number."""
        return payload(max(self.record_size, 8) - 8)


class Peer(Protocol):
    """One system under test: a running 3-node cluster and its client's three measures."""

    name: str

    def server_pids(self) -> list[int]: ...

    def prepare(self, run: int) -> None:
        """Create the run's topics or streams, so no measure includes electing their leaders."""
        ...

    def produce(self, run: int, workload: Workload) -> float:
        """Records/s of producing workload.records records, each acknowledged as durable."""
        ...

    def consume(self, run: int, workload: Workload) -> float:
        """Records/s of reading back what produce(run) wrote."""
        ...

    def end_to_end(self, run: int, workload: Workload) -> list[float]:
        """Produce-to-consume latencies (ms) of records sent at workload.rate."""
        ...


def wait_until(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `condition` until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = condition()
        except OSError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


@runtime_checkable
class WithBrokers(Protocol):
    """A peer whose server processes include a coordinator (ZooKeeper) beside its brokers."""

    def broker_pids(self) -> list[int]: ...


@runtime_checkable
class CountsRounds(Protocol):
    """A peer whose partition leader counts the Produce requests it served."""

    def leader_pid(self) -> int: ...

    def leader_produce_requests(self) -> float: ...
