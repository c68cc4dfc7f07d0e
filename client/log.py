"""The client library's log: structlog events (bound context) written through the standard
library's `logging` ("highwater.<name>"), never to stdout on their own.

A library must not print into its caller's stdout (`highwater consume` writes records there):
without any logging configured, Python shows WARNING and above on stderr; a broker process
(broker/logging_setup.py) routes them into its own stream. Events render as one line:
`event key=value ...`.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["client_logger"]


def client_logger(name: str, **context: Any) -> Any:
    """A structlog logger for `highwater.<name>` with `context` bound."""
    logger = structlog.wrap_logger(
        logging.getLogger(f"highwater.{name}"),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger.bind(**context)
