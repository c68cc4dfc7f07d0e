"""`dev up --secure`'s files that hold a password are written 0600 (local_security)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.cli.local_security import write_private


@pytest.fixture
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)  # files made by a plain write_text would be 0644
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_file_is_owner_only(tmp_path: Path, usual_umask: None) -> None:
    path = tmp_path / "server.properties"
    write_private(path, "sasl.jaas.config=secret\n")
    assert path.read_text() == "sasl.jaas.config=secret\n"
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_readable_file_is_narrowed_before_it_is_rewritten(
    tmp_path: Path, usual_umask: None
) -> None:
    path = tmp_path / "server.properties"
    path.write_text("a much longer old text\n")
    path.chmod(0o644)
    write_private(path, "new\n")
    assert path.read_text() == "new\n"
    assert path.stat().st_mode & 0o777 == 0o600
