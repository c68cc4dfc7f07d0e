"""A client's background nursery (Consumer, Producer): entering it, and leaving it after
closing the client without wrapping the caller's own exception."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType

import trio

__all__ = ["close_then_exit", "exception_leaves", "exit_stack_keeping_exception", "open_background"]


async def open_background(
    run: Callable[[trio.TaskStatus[None]], Awaitable[None]],
) -> contextlib.AsyncExitStack:
    """A nursery, held open by the returned stack, running `run` once it reported started."""
    stack = contextlib.AsyncExitStack()
    nursery = await stack.enter_async_context(trio.open_nursery())
    await nursery.start(run)
    return stack


async def close_then_exit(
    stack: contextlib.AsyncExitStack,
    close: Callable[[], Awaitable[object]],
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> bool | None:
    """A client's `__aexit__`: `close()`, then leave the background nursery."""
    try:
        await close()
    except BaseException as close_error:
        # Closing was interrupted: typically a Cancelled, maybe of our own nursery (which must
        # absorb it) or of the caller's scope. The exit stack has to see *that* exception, not
        # the body's None, or a Cancelled escapes a block that succeeded.
        if exc is not None:
            return await exit_stack_keeping_exception(stack, exc_type, exc, tb)
        if await exit_stack_keeping_exception(
            stack, type(close_error), close_error, close_error.__traceback__
        ):
            return None
        raise
    return await exit_stack_keeping_exception(stack, exc_type, exc, tb)


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
