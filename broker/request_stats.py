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
from typing import Any, Final

from broker.stats import Timings

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

_ERROR, _ONE, _MANY = 0, 1, 2
_PLANS: dict[type, tuple[tuple[str, int], ...]] = {}


def count_errors(value: object, errors: dict[int, int]) -> None:
    """Add each `error_code` found in `value` (a response dataclass, nested) to `errors`."""
    plan = _PLANS.get(type(value))
    if plan is None:
        plan = _PLANS[type(value)] = _plan(type(value))
    for name, kind in plan:
        item = getattr(value, name)
        if kind == _ERROR:
            errors[item] = errors.get(item, 0) + 1
        elif kind == _ONE:
            if item is not None:
                count_errors(item, errors)
        else:
            for element in item:
                count_errors(element, errors)


def _plan(cls: type) -> tuple[tuple[str, int], ...]:
    """Which fields hold an error code, a nested message, or a tuple of them."""
    if not dataclasses.is_dataclass(cls):
        return ()
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            plan.append((f.name, _ERROR))
            continue
        hint = hints.get(f.name)
        if _message(hint):
            plan.append((f.name, _ONE))
        elif typing.get_origin(hint) is tuple and any(
            _message(arg) for arg in typing.get_args(hint) if arg is not Ellipsis
        ):
            plan.append((f.name, _MANY))
    return tuple(plan)


def _message(hint: Any) -> bool:
    """A dataclass, or an optional one."""
    if isinstance(hint, type):
        return dataclasses.is_dataclass(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_message(arg) for arg in typing.get_args(hint))
    return False
