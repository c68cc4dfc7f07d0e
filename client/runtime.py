"""Process-wide settings for a long-running Highwater process (a broker, a CLI client, an
application that produces or consumes at high rates): the cyclic garbage collector's."""

from __future__ import annotations

import gc

__all__ = ["GC_YOUNG_THRESHOLD", "tune_garbage_collector"]

# Objects allocated between young collections of the cyclic garbage collector (Python's
# default: 700).
GC_YOUNG_THRESHOLD = 50_000


def tune_garbage_collector() -> None:
    """Freeze what the process built so far out of every later collection, and collect the
    young generation every GC_YOUNG_THRESHOLD allocations instead of 700.

    Call it once start-up is done. Records, requests and their futures live for milliseconds
    and reference counting frees them; what the collector would find is almost never a cycle.
    With Python's defaults a broker's full collections paused it for 15-25 ms every few
    seconds at 10,000 records/s, and a producer sending as fast as it can spent 5.5% of its
    instructions collecting (docs/performance.md, "What mattered", item 2). Calling it again
    does nothing: what a process builds later is not start-up."""
    young, older, oldest = gc.get_threshold()
    if young == GC_YOUNG_THRESHOLD:
        return
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
