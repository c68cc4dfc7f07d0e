"""The peer benchmark's Kafka jar cache: fetched once by Maven into a directory stamped with
the pom's digest, fetched again only when the stamp is missing or names another pom."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.benchmarks.kafka import jars

FAKE_MVN = """#!/bin/sh
# Stands in for Maven: records its call, then "copies" the jars into -DoutputDirectory.
echo "$@" >> "{calls}"
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}" ;; esac
done
touch "$out/kafka_2.13-{version}.jar" "$out/kafka-clients-{version}.jar"
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "mvn-calls"
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(calls=calls, version=jars.KAFKA_VERSION))
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def test_the_cache_is_under_the_users_cache_directory_unless_configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HIGHWATER_KAFKA_JARS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert jars.cache_dir() == tmp_path / "highwater" / "kafka-3.9"
    monkeypatch.setenv("HIGHWATER_KAFKA_JARS", str(tmp_path / "elsewhere"))
    assert jars.cache_dir() == tmp_path / "elsewhere"


def test_fetch_copies_once_and_stamps_the_directory(fake_mvn: Path, tmp_path: Path) -> None:
    directory = tmp_path / "cache" / "kafka-3.9"
    with pytest.raises(FileNotFoundError, match="make kafka-jars"):
        jars.classpath(directory)
    assert jars.fetch(directory) is True
    assert jars.cached(directory)
    assert jars.classpath(directory).split(":") == [
        str(directory / f"kafka-clients-{jars.KAFKA_VERSION}.jar"),
        str(directory / f"kafka_2.13-{jars.KAFKA_VERSION}.jar"),
    ]
    assert jars.fetch(directory) is False  # cached: Maven not run again
    (call,) = fake_mvn.read_text().splitlines()
    assert f"-f {jars.POM} dependency:copy-dependencies -DincludeScope=runtime" in call
    assert [p.name for p in directory.parent.iterdir()] == ["kafka-3.9"]  # no partial left


def test_a_directory_without_this_poms_stamp_is_fetched_again(
    fake_mvn: Path, tmp_path: Path
) -> None:
    directory = tmp_path / "kafka-3.9"
    directory.mkdir()
    (directory / "stale.jar").touch()  # a fetch cut short: no stamp
    assert not jars.cached(directory)
    assert jars.fetch(directory) is True
    assert not (directory / "stale.jar").exists()
    (directory / jars.STAMP).write_text("another pom\n")
    assert not jars.cached(directory)
    assert jars.fetch(directory) is True
    assert len(fake_mvn.read_text().splitlines()) == 2
