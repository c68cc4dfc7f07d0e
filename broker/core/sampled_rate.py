"""A rate over sampled windows, as Kafka's `Rate` over a `SampledStat` (the measure behind its
client quotas): values are added to the current window; a window that started `window_count *
window_ms` ago or more is dropped; the rate divides what the kept windows hold by the
elapsed span, at least `window_count - 1` whole windows (Kafka's `Rate.windowSize`), so a
first burst is measured against the whole quota window, not against a few milliseconds.
Time is an input.
"""

from __future__ import annotations

from collections import deque

__all__ = ["SampledRate"]


class SampledRate:
    def __init__(self, window_ms: int, window_count: int) -> None:
        if window_ms <= 0 or window_count <= 0:
            raise ValueError("window_ms and window_count must be positive")
        self.window_ms = window_ms
        self.window_count = window_count
        self._windows: deque[list[float]] = deque()  # [window start ms, total], oldest first

    def record(self, value: float, now_ms: int) -> None:
        self._expire(now_ms)
        start = now_ms - now_ms % self.window_ms
        if self._windows and self._windows[-1][0] == start:
            self._windows[-1][1] += value
        else:
            self._windows.append([start, value])

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate divides by (Kafka's `Rate.windowSize`)."""
        self._expire(now_ms)
        oldest = self._windows[0][0] if self._windows else now_ms - now_ms % self.window_ms
        elapsed = int(now_ms - oldest)
        full_windows = elapsed // self.window_ms
        minimum = self.window_count - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self.window_ms
        return max(elapsed, 1)

    def rate_per_sec(self, now_ms: int) -> float:
        self._expire(now_ms)
        total = sum(value for _, value in self._windows)
        return total * 1000 / self.window_size_ms(now_ms)

    def idle(self, now_ms: int) -> bool:
        """Nothing recorded within the kept windows (the entity may be forgotten)."""
        self._expire(now_ms)
        return not self._windows

    def _expire(self, now_ms: int) -> None:
        # Kafka's SampledStat.purgeObsoleteSamples: a window this old is reset.
        expire_age_ms = self.window_ms * self.window_count
        while self._windows and now_ms - self._windows[0][0] >= expire_age_ms:
            self._windows.popleft()
