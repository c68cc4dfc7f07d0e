"""The clients' clock: trio's, in milliseconds, as the clients' cores take `now_ms`."""

from __future__ import annotations

import trio

__all__ = ["now_ms"]


def now_ms() -> float:
    return float(trio.current_time() * 1000)
