"""ZooKeeper procedures as sans-IO scripts: generators that yield requests and get answers.

A procedure is written once, e.g. `found = yield from get_data(path)`, and run by a driver:
`await ZkClient.run(script)` in the broker, `SimZk.run(session, script)` in the simulator.
A failed request is thrown into the script as its `ZkError`, where it can be caught.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Sequence
from typing import TypeVar, cast

from controller.zk_types import (
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    GetDataMany,
    Multi,
    NodeExistsError,
    NoNodeError,
    SetData,
    TransactionOp,
    ZkError,
    ZkRequest,
    ZnodeStat,
)

__all__ = [
    "ZkScript",
    "children_or_empty",
    "create",
    "delete",
    "ensure_path",
    "exists",
    "get_children",
    "get_data",
    "get_data_many",
    "multi",
    "run_sync",
    "set_data",
    "start",
    "step",
]

T = TypeVar("T")
ZkScript = Generator[ZkRequest, object, T]


# --- the requests, each with its answer's type ------------------------------------------------


def get_data(path: str, *, watch: bool = False) -> ZkScript[tuple[bytes, ZnodeStat] | None]:
    return cast("tuple[bytes, ZnodeStat] | None", (yield GetData(path, watch)))


def get_data_many(paths: Sequence[str]) -> ZkScript[list[tuple[bytes, ZnodeStat] | None]]:
    """`get_data` of each path (unwatched), pipelined: one answer per path, in order."""
    if not paths:
        return []
    return cast("list[tuple[bytes, ZnodeStat] | None]", (yield GetDataMany(tuple(paths))))


def exists(path: str, *, watch: bool = False) -> ZkScript[ZnodeStat | None]:
    return cast("ZnodeStat | None", (yield Exists(path, watch)))


def get_children(path: str, *, watch: bool = False) -> ZkScript[list[str]]:
    return cast("list[str]", (yield GetChildren(path, watch)))


def create(
    path: str,
    data: bytes = b"",
    *,
    ephemeral: bool = False,
    sequence: bool = False,
    makepath: bool = False,
) -> ZkScript[str]:
    return cast("str", (yield Create(path, data, ephemeral, sequence, makepath)))


def set_data(path: str, data: bytes, version: int = -1) -> ZkScript[ZnodeStat]:
    return cast("ZnodeStat", (yield SetData(path, data, version)))


def delete(path: str, version: int = -1) -> ZkScript[None]:
    yield Delete(path, version)


def multi(ops: list[TransactionOp]) -> ZkScript[list[str | ZnodeStat | None]]:
    if not ops:
        return []
    return cast("list[str | ZnodeStat | None]", (yield Multi(tuple(ops))))


def ensure_path(path: str, *, makepath: bool = True) -> ZkScript[None]:
    """Create `path` (empty) unless it exists; a concurrent creator is fine."""
    if (yield from exists(path)) is None:
        with contextlib.suppress(NodeExistsError):
            yield from create(path, makepath=makepath)


def children_or_empty(path: str, *, watch: bool = False) -> ZkScript[list[str]]:
    """Children of `path`; [] if it is missing (then, with `watch`, its creation is watched)."""
    try:
        return (yield from get_children(path, watch=watch))
    except NoNodeError:
        if watch:
            yield from exists(path, watch=True)
        return []


# --- drivers ----------------------------------------------------------------------------------


def start(script: ZkScript[T]) -> tuple[ZkRequest | None, T | None]:
    """The script's first request, or (None, result) if it asks nothing."""
    return step(script, None, None)


def step(
    script: ZkScript[T], answer: object, error: ZkError | None
) -> tuple[ZkRequest | None, T | None]:
    """Give the script the answer to its last request (or throw `error` into it): its next
    request, or (None, its result) once it returns. Exceptions it does not catch propagate."""
    try:
        request = script.throw(error) if error is not None else script.send(answer)
    except StopIteration as stop:
        return None, cast("T", stop.value)
    return request, None


def run_sync(script: ZkScript[T], execute: Callable[[ZkRequest], object]) -> T:
    """Run `script` to its end with a synchronous `execute` (the simulator's ZooKeeper)."""
    request, result = start(script)
    while request is not None:
        try:
            answer, error = execute(request), None
        except ZkError as exc:
            answer, error = None, exc
        request, result = step(script, answer, error)
    return cast("T", result)
