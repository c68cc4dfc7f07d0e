"""Fixtures for integration tests that need real processes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from client.cli.zookeeper_server import (
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    free_port,
    require_zookeeper,
)

__all__ = ["zookeeper", "zookeeper_available"]


def _require_zookeeper_or_skip() -> None:
    """Skip when ZooKeeper is missing on a developer machine; in CI that is a failure."""
    try:
        require_zookeeper()
    except ZooKeeperNotInstalledError as exc:
        missing = str(exc)
    else:
        return
    # Outside the except block, so the report is one line rather than a chained traceback.
    if os.environ.get("CI"):
        pytest.fail(f"CI must have ZooKeeper installed: {missing}", pytrace=False)
    pytest.skip(missing)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real standalone ZooKeeper on a free port, shared by the whole session."""
    _require_zookeeper_or_skip()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_available() -> None:
    """For tests that start their own ZooKeeper: skip or fail like the `zookeeper` fixture."""
    _require_zookeeper_or_skip()
