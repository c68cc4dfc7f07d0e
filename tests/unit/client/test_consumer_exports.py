"""client.consumer names its public classes without importing them all (PEP 562)."""

from __future__ import annotations

import pytest

import client.consumer


def test_every_exported_name_resolves() -> None:
    for name in client.consumer.__all__:
        assert getattr(client.consumer, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Consumers'"):
        _ = client.consumer.Consumers  # type: ignore[attr-defined]
