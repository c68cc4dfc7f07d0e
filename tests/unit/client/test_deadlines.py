"""client.deadlines: one heap and one reaper for many waits' deadlines, and the client
requests' timeouts built on it (client.network), against a fake broker on real sockets."""

from __future__ import annotations

import logging

import pytest
import trio
from trio.testing import MockClock

from client.deadlines import Deadlines, Timeout, request_deadlines
from client.errors import BrokerConnectionError
from client.network import connect
from protocol.apis import ApiKey
from protocol.messages.metadata import MetadataRequest
from tests.unit.client.fake_broker import FakeCluster


class _Recorded(Timeout):
    __slots__ = ("log", "name")

    def __init__(self, name: str, log: list[tuple[str, float]]) -> None:
        super().__init__()
        self.name = name
        self.log = log

    def expire(self) -> None:
        self.log.append((self.name, trio.current_time()))


async def test_each_timeout_expires_at_its_deadline_unless_it_ended(
    autojump_clock: MockClock,
) -> None:
    deadlines = Deadlines("test")
    log: list[tuple[str, float]] = []
    start = trio.current_time()
    late, early, ended = _Recorded("late", log), _Recorded("early", log), _Recorded("ended", log)
    deadlines.add(start + 10, late)
    deadlines.add(start + 5, early)  # earlier than the reaper's sleep: it wakes sooner
    deadlines.add(start + 1, ended)
    deadlines.end(ended)
    await trio.sleep(20)
    assert log == [("early", pytest.approx(start + 5)), ("late", pytest.approx(start + 10))]
    deadlines.end(late)  # after it expired: nothing
    assert deadlines.entries == 0


class _Failing(Timeout):
    __slots__ = ()

    def expire(self) -> None:
        raise OSError("close failed")


async def test_a_failing_expiry_is_logged_and_the_others_still_expire(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The reaper is a system task: an exception escaping it would end the whole trio run
    (a broker, with every connection it serves)."""
    deadlines = Deadlines("test")
    log: list[tuple[str, float]] = []
    start = trio.current_time()
    deadlines.add(start + 1, _Failing())
    deadlines.add(start + 1, _Recorded("same time", log))
    deadlines.add(start + 2, _Recorded("later", log))
    with caplog.at_level(logging.ERROR, logger="highwater.deadlines"):
        await trio.sleep(5)
    assert [name for name, _ in log] == ["same time", "later"]
    assert deadlines.entries == 0
    assert "expiring a deadline failed" in caplog.text
    assert "OSError: close failed" in caplog.text


async def test_ended_entries_do_not_pile_up(autojump_clock: MockClock) -> None:
    """Waits that end long before their deadlines (requests answered in ms with a 30 s
    timeout) leave entries behind; the heap stays bounded by the live ones."""
    deadlines = Deadlines("test")
    log: list[tuple[str, float]] = []
    parked = _Recorded("parked", log)
    deadlines.add(trio.current_time() + 3600, parked)  # at the heap's top throughout
    for _ in range(20_000):
        timeout = _Recorded("short", log)
        deadlines.add(trio.current_time() + 3600, timeout)
        deadlines.end(timeout)
        assert deadlines.entries <= 2 * 1 + 1024 + 1
    assert log == []


async def test_a_request_that_times_out_breaks_its_connection(cluster: FakeCluster) -> None:
    """Every request waiting on that connection fails with the timeout (a late answer would
    hold up every later one), and nothing stays in the run's heap."""
    cluster.stalled.add((1, ApiKey.METADATA))
    connection = await connect("127.0.0.1", cluster.ports[1])
    failures: list[str] = []

    async def ask(timeout_ms: int) -> None:
        try:
            await connection.request(MetadataRequest(topics=None), timeout_ms=timeout_ms)
        except BrokerConnectionError as exc:
            failures.append(str(exc))

    started = trio.current_time()
    with trio.fail_after(10):  # long before the first request's own timeout
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, 60_000)
            nursery.start_soon(ask, 200)
    assert trio.current_time() - started >= 0.2
    assert failures == [f"127.0.0.1:{cluster.ports[1]}: request timed out"] * 2
    assert connection.broken
    assert request_deadlines().entries == 0


async def test_answered_requests_leave_the_connection_whole(cluster: FakeCluster) -> None:
    connection = await connect("127.0.0.1", cluster.ports[1])
    for _ in range(3):
        await connection.request(MetadataRequest(topics=None), timeout_ms=100)
    with trio.move_on_after(0.3):  # past every request's deadline
        await trio.sleep_forever()
    assert not connection.broken
    await connection.request(MetadataRequest(topics=None), timeout_ms=100)
    await connection.aclose()
