"""broker.logging_setup: JSON or console lines on stdout, bound context, stdlib routed."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import structlog

from broker.logging_setup import bind_broker, configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    for handler in [h for h in root.handlers if h.get_name() == "highwater-stdout"]:
        if handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


def json_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line]


def test_json_lines_carry_level_iso_timestamp_and_bound_context(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(json=True)
    bind_broker(3)
    with structlog.contextvars.bound_contextvars(topic="t", partition=2):
        structlog.get_logger("highwater.test").info("became leader", leader_epoch=5)
    structlog.get_logger().warning("after")
    first, second = json_lines(capsys)
    assert first["event"] == "became leader"
    assert first["level"] == "info"
    assert (first["broker_id"], first["topic"], first["partition"]) == (3, "t", 2)
    assert first["leader_epoch"] == 5
    assert datetime.fromisoformat(first["timestamp"]).tzinfo is not None
    assert second == {
        "event": "after",
        "level": "warning",
        "broker_id": 3,
        "timestamp": second["timestamp"],
    }


def test_json_is_the_default_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()  # capsys's stdout is not a terminal
    structlog.get_logger().info("hello")
    assert [line["event"] for line in json_lines(capsys)] == ["hello"]


def test_console_renderer_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=False)
    bind_broker(7)
    structlog.get_logger().info("controller elected", controller_epoch=4)
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert not out.startswith("{")
    assert "controller elected" in out
    assert "broker_id=7" in out
    assert "controller_epoch=4" in out
    assert "info" in out


def test_level_filters(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="warning")
    log = structlog.get_logger()
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    logging.getLogger("kazoo.client").info("stdlib info")
    assert [line["event"] for line in json_lines(capsys)] == ["w", "e"]


def test_debug_level(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="DEBUG")
    structlog.get_logger().debug("d")
    assert [line["event"] for line in json_lines(capsys)] == ["d"]


def test_unknown_level_is_rejected() -> None:
    with pytest.raises(ValueError, match="'loud'"):
        configure_logging(level="loud")


def test_stdlib_logging_goes_to_the_same_stream(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    bind_broker(1)
    logging.getLogger("kazoo.client").warning("Connection dropped: %s", "socket closed")
    (line,) = json_lines(capsys)
    assert line["event"] == "Connection dropped: socket closed"
    assert line["level"] == "warning"
    assert line["logger"] == "kazoo.client"
    assert line["broker_id"] == 1
    assert "timestamp" in line


def test_lines_from_other_threads_carry_the_broker_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """kazoo logs from its own threads, which see no trio task's contextvars."""
    configure_logging(json=True)
    bind_broker(2)
    thread = threading.Thread(
        target=lambda: logging.getLogger("kazoo.client").warning("Connection dropped")
    )
    thread.start()
    thread.join()
    with structlog.contextvars.bound_contextvars(broker_id=5):  # a task's own binding wins
        logging.getLogger("kazoo.client").info("Connecting")
    dropped, connecting = json_lines(capsys)
    assert (dropped["event"], dropped["broker_id"]) == ("Connection dropped", 2)
    assert (connecting["event"], connecting["broker_id"]) == ("Connecting", 5)


def test_configuring_again_forgets_the_broker_id(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    bind_broker(4)
    structlog.contextvars.clear_contextvars()
    configure_logging(json=True)
    logging.getLogger("kazoo.client").warning("unbound")
    (line,) = json_lines(capsys)
    assert "broker_id" not in line


def test_exceptions_stay_on_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger().exception("request failed")
    (line,) = json_lines(capsys)
    assert line["level"] == "error"
    assert "RuntimeError: boom" in line["exception"]


def test_configuring_twice_does_not_duplicate_output(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=False)
    configure_logging(json=True)
    configure_logging(json=True)
    structlog.get_logger().info("once")
    logging.getLogger("trio").warning("stdlib once")
    assert [line["event"] for line in json_lines(capsys)] == ["once", "stdlib once"]


def test_loggers_created_before_configuration_follow_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = structlog.get_logger("module.level")
    configure_logging(json=True)
    log.info("early")
    assert [line["event"] for line in json_lines(capsys)] == ["early"]
