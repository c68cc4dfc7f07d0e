"""Fixtures: an in-process fake cluster on real loopback sockets (see fake_broker.py)."""

from __future__ import annotations

import pytest
import trio

from tests.unit.client.fake_broker import FakeCluster


@pytest.fixture
async def cluster(nursery: trio.Nursery) -> FakeCluster:
    fake = FakeCluster(1)
    await fake.start(nursery)
    return fake


@pytest.fixture
async def cluster3(nursery: trio.Nursery) -> FakeCluster:
    fake = FakeCluster(3)
    await fake.start(nursery)
    return fake
