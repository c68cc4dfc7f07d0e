"""An exception raised inside `async with Consumer/Producer` comes out as itself, not wrapped
in the ExceptionGroup of the client's background nursery."""

from __future__ import annotations

import pytest

from client.consumer import Consumer
from client.errors import UnknownTopicError
from client.producer import Producer

NOWHERE = "127.0.0.1:9"  # never connected to: neither client talks to a broker here


async def test_a_consumer_body_error_is_not_wrapped() -> None:
    original = ValueError("the caller's")
    with pytest.raises(UnknownTopicError) as caught:
        async with Consumer(NOWHERE):
            try:
                raise original
            except ValueError as exc:
                raise UnknownTopicError("UNKNOWN_TOPIC_OR_PARTITION: t-0") from exc
    assert caught.value.__cause__ is original  # its own cause, as raised


async def test_a_group_consumer_body_error_is_not_wrapped() -> None:
    with pytest.raises(KeyError):
        async with Consumer(NOWHERE, group_id="g"):
            raise KeyError("k")


async def test_a_producer_body_error_is_not_wrapped() -> None:
    with pytest.raises(UnknownTopicError):
        async with Producer(NOWHERE):
            raise UnknownTopicError("UNKNOWN_TOPIC_OR_PARTITION: t-0")
