"""bench client_gaps: it wraps three client methods by name, so a rename must fail here rather
than only when someone runs the diagnostic; and its report is the gaps between the timings."""

from __future__ import annotations

from client.consumer.consumer import Consumer
from client.consumer.fetcher import Fetcher
from client.network import BrokerConnection
from tests.benchmarks.client_gaps import _Timings


def test_installing_wraps_the_three_methods_and_undoing_restores_them() -> None:
    originals = (BrokerConnection.request, Fetcher._handle_partition, Consumer.poll)
    undo = _Timings().install()
    try:
        wrapped = (BrokerConnection.request, Fetcher._handle_partition, Consumer.poll)
        assert all(w is not o for w, o in zip(wrapped, originals, strict=True))
    finally:
        undo()
    assert (BrokerConnection.request, Fetcher._handle_partition, Consumer.poll) == originals


def test_the_report_gives_request_times_and_the_gaps_between_requests() -> None:
    timings = _Timings()
    # Ten Produce requests, each 3 ms, the next sent 1 ms after the answer; the first tenth
    # (one request) is left out of the figures.
    timings.produce = [(i * 0.004, i * 0.004 + 0.003) for i in range(10)]
    timings.to_poll = [0.0005] * 10
    assert timings.report() == [
        "Produce requests: 10",
        "a Produce, sent to answered: median 3.00 ms, mean 3.00 ms",
        "a Produce answered to the next one sent: median 1.00 ms, mean 1.00 ms",
        "a Fetch answer with records to poll returning them: median 0.50 ms, mean 0.50 ms",
    ]
