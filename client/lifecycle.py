"""Leaving a client's background nursery without wrapping the caller's own exception."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import TracebackType

__all__ = ["exception_leaves", "exit_stack_keeping_exception"]


def exception_leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or `exc` itself."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from exception_leaves(inner)
    else:
        yield exc


async def exit_stack_keeping_exception(
    stack: contextlib.AsyncExitStack,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> bool | None:
    """`stack.__aexit__`, except that an exception of the `async with` body comes out as
    itself: trio's nursery (inside the stack) wraps it in an ExceptionGroup, and a caller of
    `async with Consumer(...)` expects `except UnknownTopicError` to work, as without one."""
    try:
        return await stack.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as group:
        leaves = list(exception_leaves(group))
        if exc is None or len(leaves) != 1 or leaves[0] is not exc:
            raise
        cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
        try:
            raise exc from None
        finally:  # as the body raised it: its own cause and context, not the group
            exc.__cause__, exc.__context__ = cause, context
            exc.__suppress_context__ = suppress
