"""Loaded (via PYTHONPATH) only by broker processes that run with libfaketime preloaded.

libfaketime 0.9.10 (Debian 12) with FAKETIME_DONT_FAKE_MONOTONIC=1 fails
clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), which Python 3.11's time.sleep uses, with
EINVAL: kazoo's connection thread then dies on its first retry back-off. Waiting on a
condition variable with the same timeout works under the library, so time.sleep does that.
"""

import threading
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    threading.Event().wait(seconds)


time.sleep = _sleep
