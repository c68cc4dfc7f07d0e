"""The reassignment throttle: a bytes/s quota on what throttled replicas copy (Kafka's
ReplicationQuotaManager, follower side).

The rate is measured over the last `window_count` windows of `window_ms` each, as Kafka's
sampled rate (`replication.quota.window.num` 11, `.size.seconds` 1): one burst cannot starve a
partition for long, and a long copy averages out at the quota. Time is an input.
"""

from __future__ import annotations

from collections import deque
from typing import Final

__all__ = ["DEFAULT_WINDOW_COUNT", "DEFAULT_WINDOW_MS", "ReplicationQuota"]

DEFAULT_WINDOW_COUNT: Final = 11
DEFAULT_WINDOW_MS: Final = 1000


class ReplicationQuota:
    """Bytes recorded per time window; `exceeded(rate, now_ms)` says whether throttled
    replicas must sit out the next fetch."""

    def __init__(
        self, window_ms: int = DEFAULT_WINDOW_MS, window_count: int = DEFAULT_WINDOW_COUNT
    ) -> None:
        if window_ms <= 0 or window_count <= 0:
            raise ValueError("window_ms and window_count must be positive")
        self.window_ms = window_ms
        self.window_count = window_count
        self._windows: deque[list[int]] = deque()  # [window start ms, bytes], oldest first

    def record(self, byte_count: int, now_ms: int) -> None:
        self._expire(now_ms)
        start = now_ms - now_ms % self.window_ms
        if self._windows and self._windows[-1][0] == start:
            self._windows[-1][1] += byte_count
        else:
            self._windows.append([start, byte_count])

    def rate_bytes_per_sec(self, now_ms: int) -> float:
        """Bytes over the elapsed span of the kept windows (at least one whole window, so a
        single early burst is not divided by a tiny span)."""
        self._expire(now_ms)
        if not self._windows:
            return 0.0
        span_ms = max(now_ms - self._windows[0][0], self.window_ms)
        return sum(b for _, b in self._windows) * 1000 / span_ms

    def exceeded(self, rate_bytes_per_sec: int, now_ms: int) -> bool:
        return rate_bytes_per_sec > 0 and self.rate_bytes_per_sec(now_ms) > rate_bytes_per_sec

    def _expire(self, now_ms: int) -> None:
        oldest = now_ms - self.window_ms * self.window_count
        while self._windows and self._windows[0][0] + self.window_ms <= oldest:
            self._windows.popleft()
