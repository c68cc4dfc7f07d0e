"""bench-latency's time split: the mean of each part of an API's requests between two
scrapes of a broker's metrics."""

from __future__ import annotations

from tests.benchmarks.latency import time_split
from tests.integration.metrics_checks import Scrape


def _scrape(api: str, count: float, **sums_s: float) -> Scrape:
    """A broker's request-time histograms as scraped; `decode` is the "request" part."""
    names = {
        "total": "highwater_network_request_total_time_seconds",
        "decode": "highwater_network_request_queue_time_seconds",
        "local": "highwater_network_request_local_time_seconds",
        "remote": "highwater_network_request_remote_time_seconds",
        "send": "highwater_network_response_send_time_seconds",
    }
    labels = (("request", api),)
    out: Scrape = {}
    for kind, name in names.items():
        out[(f"{name}_count", labels)] = count
        out[(f"{name}_sum", labels)] = sums_s.get(kind, 0.0)
    return out


def test_the_split_is_the_mean_of_each_part_over_the_requests_between_the_scrapes() -> None:
    before = _scrape("Produce", 10, total=1.0, decode=0.1, local=0.2, remote=0.6, send=0.1)
    after = _scrape("Produce", 110, total=1.3, decode=0.105, local=0.22, remote=0.865, send=0.11)
    assert time_split(before, after, "Produce") == (
        "Produce x100: 3000 µs (decode 50, local 200, remote 2650, send 100)"
    )


def test_an_api_without_requests_between_the_scrapes_says_none() -> None:
    same = _scrape("Fetch", 5, total=0.5)
    assert time_split(same, same, "Fetch") == "Fetch: none"
    assert time_split({}, {}, "Produce") == "Produce: none"
