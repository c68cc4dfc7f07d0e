"""tests/benchmarks/wake_floor.py measures both servers (real sockets, a client process)."""

from __future__ import annotations

import pytest

from tests.benchmarks.wake_floor import one


@pytest.mark.parametrize("server", ["plain epoll", "trio"])
def test_each_server_answers_every_round_trip_and_reports_its_cpu(server: str) -> None:
    assert one(server, 20, 0.0) > 0
    assert one(server, 5, 0.001) > 0
