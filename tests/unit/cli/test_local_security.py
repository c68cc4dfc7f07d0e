"""`dev up --secure`'s files that hold a password are written 0600 (local_security), and
its brokers get a ZooKeeper login."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.cli.local_security import (
    broker_settings,
    ensure_secrets,
    write_private,
    write_zookeeper_properties,
)
from client.cli.properties import read_properties_file


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


def test_a_directory_from_before_zookeeper_acls_gets_a_zookeeper_password(
    tmp_path: Path, usual_umask: None
) -> None:
    tls = tmp_path / "tls"
    tls.mkdir()
    (tls / "server.pem").write_text("kept\n")  # no certificates made: they are there
    write_private(tls / "passwords.properties", "broker=b-pw\nadmin=a-pw\n")
    ensure_secrets(tmp_path)
    passwords = read_properties_file(tls / "passwords.properties")
    assert passwords["broker"] == "b-pw" and passwords["admin"] == "a-pw"
    assert len(passwords["zookeeper"]) >= 16
    assert (tls / "passwords.properties").stat().st_mode & 0o777 == 0o600

    settings = broker_settings(tmp_path, "127.0.0.1:1", "127.0.0.1:2")
    assert settings["zookeeper.set.acl"] == "true"
    assert settings["zookeeper.digest.password"] == passwords["zookeeper"]
    path = write_zookeeper_properties(tmp_path, "127.0.0.1:2181")
    assert path.stat().st_mode & 0o777 == 0o600
    written = read_properties_file(path)
    assert written["zookeeper.connect"] == "127.0.0.1:2181"
    assert written["zookeeper.digest.username"] == settings["zookeeper.digest.username"]
    assert written["zookeeper.digest.password"] == passwords["zookeeper"]
