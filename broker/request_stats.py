"""What the server counts per API while it answers requests (Kafka's RequestMetrics).

Plain numbers, read by broker/metrics.py at scrape time. Per request: five durations
(`Timings`), the request and response sizes, and each error code in the response (Kafka's
ErrorsPerSec counts them per partition, NONE included). The server records only when the
metrics listener is on, so a broker without one pays nothing here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Final

from protocol.stats import Timings

__all__ = ["TIME_KINDS", "ApiStats", "RequestStats", "count_errors"]

# Kafka's split of a request's time: request (here: decoding the frame; there is no request
# queue), local (the handler, less its waits), remote (parked in the purgatory: acks=all,
# long polls), response send (encoding and writing the answer); total is their sum.
TIME_KINDS: Final = ("total", "request", "local", "remote", "send")


class ApiStats:
    __slots__ = ("errors", "request_bytes", "requests", "response_bytes", "times")

    def __init__(self) -> None:
        self.requests = 0
        self.request_bytes = 0
        self.response_bytes = 0
        self.times = {kind: Timings() for kind in TIME_KINDS}
        self.errors: dict[int, int] = {}


class RequestStats:
    def __init__(self) -> None:
        self.by_api: dict[int, ApiStats] = {}

    def record(
        self,
        api_key: int,
        request_s: float,
        local_s: float,
        remote_s: float,
        send_s: float,
        request_bytes: int,
        response_bytes: int,
        response: object,
    ) -> None:
        stats = self.by_api.get(api_key)
        if stats is None:
            stats = self.by_api[api_key] = ApiStats()
        stats.requests += 1
        stats.request_bytes += request_bytes
        stats.response_bytes += response_bytes
        times = stats.times
        times["total"].observe(request_s + local_s + remote_s + send_s)
        times["request"].observe(request_s)
        times["local"].observe(local_s)
        times["remote"].observe(remote_s)
        times["send"].observe(send_s)
        if response is not None:
            count_errors(response, stats.errors)


# -- error codes in a response, by walking its dataclasses ---------------------------------

ErrorWalker = Callable[[object, dict[int, int]], None]
_WALKERS: dict[type, ErrorWalker] = {}


def count_errors(value: object, errors: dict[int, int]) -> None:
    """Add each `error_code` found in `value` (a response dataclass, nested) to `errors`."""
    walker = _WALKERS.get(type(value))
    if walker is None:
        walker = _WALKERS[type(value)] = _compile(type(value))
    walker(value, errors)


def _compile(cls: type) -> ErrorWalker:
    """A function walking `cls`'s error codes with plain loops, generated once per response
    type from its fields' types (a generic recursive walk costs several times more)."""
    lines: list[str] = []
    _emit(cls, "v", 1, lines, [0])
    source = "def walk(v, e):\n" + ("\n".join(lines) if lines else "    pass")
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # generated from dataclass field names only
    walker: ErrorWalker = namespace["walk"]
    return walker


def _emit(cls: type, var: str, depth: int, lines: list[str], counter: list[int]) -> None:
    if not dataclasses.is_dataclass(cls):
        return
    pad = "    " * depth
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        if f.name == "error_code":
            lines.append(f"{pad}c = {var}.error_code; e[c] = e.get(c, 0) + 1")
            continue
        nested = _message(hint)
        if nested is not None:
            counter[0] += 1
            name = f"n{counter[0]}"
            inner: list[str] = []
            _emit(nested, name, depth + 1, inner, counter)
            if inner:
                lines.append(f"{pad}{name} = {var}.{f.name}")
                lines.append(f"{pad}if {name} is not None:")
                lines.extend(inner)
        elif typing.get_origin(hint) is tuple:
            element = next(
                (m for a in typing.get_args(hint) if (m := _message(a)) is not None), None
            )
            if element is None:
                continue
            counter[0] += 1
            name = f"x{counter[0]}"
            inner = []
            _emit(element, name, depth + 1, inner, counter)
            if inner:
                lines.append(f"{pad}for {name} in {var}.{f.name}:")
                lines.extend(inner)


def _message(hint: Any) -> type | None:
    """The dataclass `hint` names, or names as optional (None: neither)."""
    if isinstance(hint, type):
        return hint if dataclasses.is_dataclass(hint) else None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        for arg in typing.get_args(hint):
            found = _message(arg)
            if found is not None:
                return found
    return None
