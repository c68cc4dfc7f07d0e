"""The clients' own figures, for Python callers: `Producer.metrics()` and `Consumer.metrics()`.

Plain counters the producer and consumer bump as they work (one or two additions per batch or
fetch, no lock: a client lives in one trio task tree), turned into Kafka's client metric names
when asked: `record-send-total`, `record-send-rate`, `record-error-rate`, `record-retry-rate`,
`batch-size-avg`, `request-latency-avg`, `records-lag`, ... A rate is over the time since the
newest earlier `metrics()` call at least `RATE_WINDOW_S` old (the client's lifetime until
then), as Kafka's are over a sample window.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from protocol.topic_partition import TopicPartition

__all__ = ["RATE_WINDOW_S", "ConsumerMetrics", "ProducerMetrics"]

RATE_WINDOW_S: Final = 30.0


@dataclass
class _Rates:
    """Rates of some totals over a trailing window of `metrics()` calls: since the newest
    snapshot at least RATE_WINDOW_S old (at first, since the client started)."""

    samples: deque[tuple[float, dict[str, float]]] = field(
        default_factory=lambda: deque([(time.monotonic(), {})])
    )

    def rates(self, now: float, totals: dict[str, float]) -> dict[str, float]:
        while len(self.samples) > 1 and now - self.samples[1][0] >= RATE_WINDOW_S:
            self.samples.popleft()
        then, old = self.samples[0] if self.samples else (now, dict.fromkeys(totals, 0.0))
        self.samples.append((now, dict(totals)))
        elapsed = now - then
        return {
            name: (value - old.get(name, 0.0)) / elapsed if elapsed > 0 else 0.0
            for name, value in totals.items()
        }


@dataclass
class ProducerMetrics:
    """What the producer counts (records, not batches, for sends, errors and retries)."""

    records_sent: int = 0  # acknowledged (acks=0: written to the socket)
    record_errors: int = 0  # failed for good
    record_retries: int = 0  # records of batches queued again for a retry
    batches_sent: int = 0
    batch_bytes: int = 0
    batch_bytes_max: int = 0
    requests: int = 0
    request_latency_s: float = 0.0
    request_latency_max_s: float = 0.0
    _rates: _Rates = field(default_factory=_Rates)

    def batch_done(self, records: int, size: int) -> None:
        self.records_sent += records
        self.batches_sent += 1
        self.batch_bytes += size
        self.batch_bytes_max = max(self.batch_bytes_max, size)

    def request_done(self, latency_s: float) -> None:
        self.requests += 1
        self.request_latency_s += latency_s
        self.request_latency_max_s = max(self.request_latency_max_s, latency_s)

    def snapshot(self) -> dict[str, float]:
        totals = {
            "record-send": float(self.records_sent),
            "record-error": float(self.record_errors),
            "record-retry": float(self.record_retries),
            "request": float(self.requests),
            "outgoing-byte": float(self.batch_bytes),
        }
        rates = self._rates.rates(time.monotonic(), totals)
        out = {f"{name}-total": value for name, value in totals.items()}
        out.update({f"{name}-rate": value for name, value in rates.items()})
        out["batch-size-avg"] = self.batch_bytes / self.batches_sent if self.batches_sent else 0.0
        out["batch-size-max"] = float(self.batch_bytes_max)
        out["records-per-batch-avg"] = (
            self.records_sent / self.batches_sent if self.batches_sent else 0.0
        )
        out["request-latency-avg"] = (
            self.request_latency_s * 1000 / self.requests if self.requests else 0.0
        )
        out["request-latency-max"] = self.request_latency_max_s * 1000
        return out


@dataclass
class ConsumerMetrics:
    """What the consumer counts; lag is read from its partitions when asked."""

    records_consumed: int = 0  # returned by poll
    bytes_fetched: int = 0
    fetches: int = 0
    fetch_latency_s: float = 0.0
    fetch_latency_max_s: float = 0.0
    _rates: _Rates = field(default_factory=_Rates)

    def fetch_done(self, latency_s: float, size: int) -> None:
        self.fetches += 1
        self.bytes_fetched += size
        self.fetch_latency_s += latency_s
        self.fetch_latency_max_s = max(self.fetch_latency_max_s, latency_s)

    def snapshot(self, lags: dict[TopicPartition, int]) -> dict[str, float]:
        totals = {
            "records-consumed": float(self.records_consumed),
            "bytes-consumed": float(self.bytes_fetched),
            "fetch": float(self.fetches),
        }
        rates = self._rates.rates(time.monotonic(), totals)
        out = {f"{name}-total": value for name, value in totals.items()}
        out.update({f"{name}-rate": value for name, value in rates.items()})
        out["fetch-latency-avg"] = (
            self.fetch_latency_s * 1000 / self.fetches if self.fetches else 0.0
        )
        out["fetch-latency-max"] = self.fetch_latency_max_s * 1000
        out["records-lag-max"] = float(max(lags.values(), default=0))
        for tp, lag in sorted(lags.items()):
            out[f"records-lag:{tp.topic}-{tp.partition}"] = float(lag)
        return out
