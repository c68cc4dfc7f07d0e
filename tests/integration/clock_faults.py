"""A broker's wall clock skewed and stepped, with libfaketime (Debian's `faketime` package).

The library is preloaded into one broker process (`FakeClock.env()` for `BrokerProcess.env`)
and reads a relative offset in seconds from a file of its own at most once a second, so the
test moves that broker's wall clock while it runs: `set_offset_s(600)` jumps it 10 minutes
ahead, `set_offset_s(-600)` back. CLOCK_MONOTONIC is left alone
(FAKETIME_DONT_FAKE_MONOTONIC), as on a machine whose NTP daemon steps the clock: only
`time.time()` and its kin move. `faketime_shim/sitecustomize.py` works around the library's
one bug that Python meets. `unavailable()` says why this machine cannot do it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LIBFAKETIME", "FakeClock", "unavailable"]

# The multi-threaded build (kazoo's threads read the clock too), where Debian puts it.
LIBFAKETIME = next(
    iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))),
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
)
_SHIM = Path(__file__).with_name("faketime_shim")
# How long a change to the offset file may take to reach the process (it reads it at most
# once per FAKETIME_CACHE_DURATION seconds).
PICKUP_S = 1.5


@dataclass(frozen=True)
class FakeClock:
    path: Path  # holds the offset, e.g. "+600" or "-600" (seconds)

    def __post_init__(self) -> None:
        if not self.path.exists():
            self.set_offset_s(0)

    def env(self) -> dict[str, str]:
        path = [str(_SHIM), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {
            "PYTHONPATH": os.pathsep.join(path),
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_CACHE_DURATION": "1",
        }

    def set_offset_s(self, offset_s: int) -> None:
        """The process's wall clock is real time + `offset_s` from the next read of the file
        on (within PICKUP_S). Written whole, then renamed: never read half-written."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".new")
        partial.write_text(f"{offset_s:+d}\n")
        os.replace(partial, self.path)

    def offset_s(self) -> int:
        return int(self.path.read_text().strip())


def unavailable(directory: Path) -> str | None:
    """None if a Python process here runs with a faked wall clock and a real monotonic one;
    else the reason (to skip with)."""
    if not LIBFAKETIME.exists():
        return f"{LIBFAKETIME} is missing (apt-get install faketime)"
    clock = FakeClock(directory / "probe-offset")
    clock.set_offset_s(3600)
    probe = "import time; time.sleep(0.01); print(time.time(), time.monotonic())"
    try:
        before = _clocks(probe, {})
        faked = _clocks(probe, clock.env())
        after = _clocks(probe, {})
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return f"a process with libfaketime preloaded did not run: {exc}"
    wall_skew = faked[0] - before[0]
    if not 3590 <= wall_skew <= 3610 + (after[0] - before[0]):
        return f"libfaketime did not move the wall clock by an hour (moved {wall_skew:.0f} s)"
    if not before[1] <= faked[1] <= after[1]:
        return "libfaketime moved CLOCK_MONOTONIC too"
    return None


def _clocks(code: str, env: dict[str, str]) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    return float(out[0]), float(out[1])
