"""Reading a broker's own log lines (JSON, one a line, UTC timestamps): the events written
since a byte offset, and the seconds from a moment (time.time()) to the first of a kind."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any


def events_since(path: Path, offset: int) -> Iterator[dict[str, Any]]:
    """The JSON log lines of `path` from byte `offset` on; other lines (tracebacks, a
    line cut by a kill) are skipped."""
    with path.open("rb") as f:
        f.seek(offset)
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                yield event


def seconds_to(events: Sequence[Mapping[str, Any]], name: str, since_s: float) -> float | None:
    """Seconds from `since_s` (a time.time()) to the first event called `name` (None: none
    yet)."""
    for event in events:
        if event.get("event") == name and "timestamp" in event:
            stamp = datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
            return stamp.timestamp() - since_s
    return None
