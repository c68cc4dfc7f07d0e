"""Bounded history of named series sampled at shared times: the status page's last hour. Pure.

Every series holds `fields` integers per sample (counts and offsets, never negative) in one
fixed `array('q')` of `capacity * fields` slots, reused round-robin with the shared times, so
a series costs the same 8 bytes a value whatever happens, and the whole store at most
`max_series` of them. A series absent from a sample holds a gap there. A series absent for a
whole window (a deleted topic, an emptied group) is forgotten.

When `max_series` are kept and a new name appears, the kept series absent from this sample go
first, the one seen longest ago first; if every kept series is still sampled, the new name is
not kept (counted in `refused`) rather than evicting a live one, which would come back at the
next sample and evict another, and so on.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = ["GAP", "SeriesRing"]

GAP: Final = -1  # no value at this sample (series values are never negative)

K = TypeVar("K", bound=Hashable)


@dataclass
class _Series:
    values: array[int]
    last_seen: int  # the sample number it was last present in


class SeriesRing(Generic[K]):
    def __init__(self, capacity: int, fields: int, max_series: int) -> None:
        if capacity < 2 or fields < 1 or max_series < 1:
            raise ValueError("capacity >= 2, fields >= 1 and max_series >= 1")
        self.capacity = capacity
        self.fields = fields
        self.max_series = max_series
        self.refused = 0  # new series not kept since max_series live ones are
        self._times_ms = array("q", [0] * capacity)
        self._taken = 0  # samples taken so far; the next goes to slot _taken % capacity
        self._series: dict[K, _Series] = {}

    def add(self, time_ms: int, sample: Mapping[K, Sequence[int | None]]) -> None:
        """One sample: each series' `fields` values (None: a gap) at `time_ms`."""
        n = self._taken
        slot = (n % self.capacity) * self.fields
        self._times_ms[n % self.capacity] = time_ms
        for key, values in sample.items():
            series = self._series.get(key)
            if series is None:
                series = self._admit(key, sample)
                if series is None:
                    continue
            series.last_seen = n
            for i in range(self.fields):
                value = values[i]
                series.values[slot + i] = GAP if value is None or value < 0 else value
        for key, series in list(self._series.items()):
            if series.last_seen == n:
                continue
            if n - series.last_seen >= self.capacity:
                del self._series[key]  # nothing left of it in the window
                continue
            for i in range(self.fields):
                series.values[slot + i] = GAP
        self._taken = n + 1

    def _admit(self, key: K, sample: Mapping[K, object]) -> _Series | None:
        if len(self._series) >= self.max_series:
            gone = [(s.last_seen, k) for k, s in self._series.items() if k not in sample]
            if not gone:
                self.refused += 1
                return None
            oldest = min(range(len(gone)), key=lambda i: gone[i][0])
            del self._series[gone[oldest][1]]
        series = _Series(array("q", [GAP] * (self.capacity * self.fields)), -1)
        self._series[key] = series
        return series

    @property
    def taken(self) -> int:
        """Samples taken so far (the window holds the last `capacity`)."""
        return self._taken

    def __len__(self) -> int:
        return len(self._series)

    def __contains__(self, key: object) -> bool:
        return key in self._series

    def names(self) -> Iterator[K]:
        return iter(list(self._series))

    def _slots(self) -> range:
        kept = min(self._taken, self.capacity)
        return range(self._taken - kept, self._taken)

    def times_ms(self) -> list[int]:
        """The sample times in the window, oldest first."""
        return [self._times_ms[n % self.capacity] for n in self._slots()]

    def values(self, key: K, field: int) -> list[int | None]:
        """One field of a series at each of `times_ms()` (None: a gap)."""
        series = self._series[key]
        out: list[int | None] = []
        for n in self._slots():
            value = series.values[(n % self.capacity) * self.fields + field]
            out.append(None if value == GAP else value)
        return out

    def memory_bytes(self) -> int:
        """The arrays' buffers: what grows with series and capacity (dict and object
        overhead, about 200 bytes a series, comes on top)."""
        item = self._times_ms.itemsize
        return item * (len(self._times_ms) + sum(len(s.values) for s in self._series.values()))
