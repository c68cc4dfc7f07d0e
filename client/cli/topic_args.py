"""A topic named either way: as an argument (kcat's habit, `highwater produce T`) or with
-t/--topic (Kafka's tools' habit, `kafka-topics --describe --topic T`). Every command that takes
topics accepts both, so neither habit fails; the old form of each command keeps working.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = [
    "one_topic",
    "optional_topic",
    "resolve_topic",
    "resolve_topics",
    "topic_option",
    "topics_option",
]

F = TypeVar("F", bound=Callable[..., Any])


def topic_option(func: F) -> F:
    """-t/--topic TOPIC beside a command's TOPIC argument (passed as `topic_option`)."""
    return click.option(
        "-t", "--topic", "topic_option", metavar="TOPIC", help="The topic (as the argument)."
    )(func)


def topics_option(func: F) -> F:
    """-t/--topic TOPIC, repeatable, beside a command's TOPIC... arguments (`topic_options`)."""
    return click.option(
        "-t",
        "--topic",
        "topic_options",
        multiple=True,
        metavar="TOPIC",
        help="A topic (as an argument; repeatable).",
    )(func)


def one_topic(argument_name: str = "topic", metavar: str = "TOPIC") -> Callable[[F], F]:
    """An optional TOPIC argument and -t/--topic: `resolve_topic` picks the one given."""

    def decorate(func: F) -> F:
        return click.argument(argument_name, metavar=f"[{metavar}]", required=False)(
            topic_option(func)
        )

    return decorate


def optional_topic(argument: str | None, option: str | None) -> str | None:
    """The topic given as the argument or with --topic (both: they must agree), or None."""
    if argument is not None and option is not None and argument != option:
        raise click.UsageError(
            f"the argument names topic {argument!r} and --topic {option!r}: give one"
        )
    return argument if argument is not None else option


def resolve_topic(argument: str | None, option: str | None) -> str:
    """As optional_topic, but one of them is needed."""
    topic = optional_topic(argument, option)
    if topic is None:
        raise click.UsageError("give the topic: TOPIC or -t/--topic TOPIC")
    return topic


def resolve_topics(arguments: tuple[str, ...], options: tuple[str, ...]) -> tuple[str, ...]:
    """The topics given as arguments and with --topic, in that order, each once."""
    return tuple(dict.fromkeys((*arguments, *options)))
