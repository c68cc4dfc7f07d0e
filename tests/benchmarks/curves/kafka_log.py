"""Reading a Kafka broker's server.log: log4j's "[%d]" stamps (local time) and the seconds from
an event to the first line that matches (kafka_restart.py's steps, kafka_side.py's controlled
shutdown)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

# log4j's PatternLayout "[%d] %p %m (%c)%n" (tests/benchmarks/kafka/cluster.py): %d is ISO8601
# in the JVM's time zone, the machine's local time.
_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")


def line_time_s(line: str) -> float | None:
    """The time.time() of a Kafka log line's stamp (local time), None for a line without one
    (a stack trace's)."""
    found = _LINE.match(line)
    if found is None:
        return None
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def lines_since(path: Path, offset: int) -> list[str]:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace").splitlines()


def seconds_to(lines: Sequence[str], pattern: re.Pattern[str], since_s: float) -> float | None:
    """Seconds from `since_s` (a time.time()) to the first stamped line matching `pattern`."""
    for line in lines:
        stamp = line_time_s(line)
        if stamp is not None and pattern.search(line):
            return stamp - since_s
    return None


def count(lines: Sequence[str], pattern: re.Pattern[str]) -> int:
    return sum(1 for line in lines if pattern.search(line))
