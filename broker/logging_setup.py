"""structlog set-up for a broker process: JSON lines off a terminal, readable on one; stdout.

Context such as broker_id, topic, partition and leader_epoch is bound with structlog's
contextvars (`bind_broker`, `structlog.contextvars.bound_contextvars`): a trio task inherits a
copy of its parent's context when spawned, so bind before opening the nurseries whose tasks
should carry it. Standard-library logging (kazoo, trio) is routed to the same renderer so one
stream holds every line in one format; kazoo logs from its own threads, which see no trio
task's context, so `bind_broker` also tags every line of the process.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["bind_broker", "configure_logging"]

_HANDLER_NAME: Final = "highwater-stdout"
# Fields for every line of this process, whatever thread logs it (bind_broker).
_PROCESS_CONTEXT: dict[str, Any] = {}


def configure_logging(*, json: bool | None = None, level: str = "info") -> None:
    """Configure structlog (and stdlib logging) to write to stdout; safe to call again.

    `json`: None picks JSON when stdout is not a terminal (files, pipes, containers) and the
    console renderer when it is. `level`: debug, info, warning, error or critical.
    Each call replaces the previous configuration (nothing accumulates, `bind_broker`'s
    process-wide fields included), and binds the current `sys.stdout`.
    """
    level_number = _level_number(level)
    stream = sys.stdout
    use_json = json if json is not None else not stream.isatty()
    _PROCESS_CONTEXT.clear()

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        _merge_process_context,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor
    if use_json:
        # Tracebacks become a string field so each event stays one JSON line.
        shared_tail: list[Processor] = [structlog.processors.format_exc_info]
        renderer = structlog.processors.JSONRenderer()
    else:
        shared_tail = []  # ConsoleRenderer formats exc_info itself
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty())

    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            *shared_tail,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_number),
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        # Not cached: a reconfiguration (tests, CLI flags) reaches module-level loggers too.
        cache_logger_on_first_use=False,
    )

    handler = logging.StreamHandler(stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *shared_tail,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_number)


def bind_broker(broker_id: int) -> None:
    """Tag every later log event of this process with broker_id: this task's and those of the
    tasks it spawns (contextvars), and lines from threads that see no task's context (kazoo's
    connection and event threads)."""
    structlog.contextvars.bind_contextvars(broker_id=broker_id)
    _PROCESS_CONTEXT["broker_id"] = broker_id


def _merge_process_context(
    logger: WrappedLogger, method_name: str, event_dict: EventDict
) -> EventDict:
    for key, value in _PROCESS_CONTEXT.items():
        event_dict.setdefault(key, value)  # a task's own binding wins
    return event_dict


def _level_number(level: str) -> int:
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None or number == logging.NOTSET:
        raise ValueError(
            f"unknown log level {level!r}: expected debug, info, warning, error or critical"
        )
    return number
