"""Kafka 3.9's broker jars and their runtime dependencies, copied by Maven from the pom beside
this file into a cache directory once per machine; `python -m tests.benchmarks.kafka.jars`
(what `make kafka-jars` runs) fetches them where missing and does nothing where cached."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KAFKA_VERSION = "3.9.2"
POM = Path(__file__).with_name("pom.xml")
# Written last, holding the pom's digest: a directory without it (a fetch cut short) or with
# another pom's digest is fetched again.
STAMP = "fetched-from-pom.sha256"


def cache_dir() -> Path:
    """~/.cache/highwater/kafka-3.9, or $HIGHWATER_KAFKA_JARS."""
    configured = os.environ.get("HIGHWATER_KAFKA_JARS")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "highwater" / "kafka-3.9"


def pom_digest(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def cached(directory: Path, pom: Path = POM) -> bool:
    """The jars of this pom are all in `directory`."""
    stamp = directory / STAMP
    return stamp.is_file() and stamp.read_text().strip() == pom_digest(pom)


def classpath(directory: Path | None = None) -> str:
    """The brokers' -cp; raises FileNotFoundError with the fix when the jars are missing."""
    directory = directory or cache_dir()
    if not cached(directory):
        raise FileNotFoundError(
            f"Kafka {KAFKA_VERSION}'s jars are not in {directory}: make kafka-jars"
        )
    return ":".join(str(jar) for jar in sorted(directory.glob("*.jar")))


def fetch(directory: Path | None = None, pom: Path = POM) -> bool:
    """Copy the pom's runtime jars into `directory` unless there already; True if it fetched.
    Maven's own repository (~/.m2) keeps the downloads, so a second machine-local copy after
    the cache directory is removed needs no network."""
    directory = directory or cache_dir()
    if cached(directory, pom):
        return False
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SystemExit("mvn is not installed (apt-get install maven)")
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".kafka-jars-", dir=directory.parent) as partial:
        subprocess.run(
            [
                mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
                "dependency:copy-dependencies", "-DincludeScope=runtime",
                f"-DoutputDirectory={partial}",
            ],
            check=True,
        )  # fmt: skip
        if not any(Path(partial).glob(f"kafka_2.13-{KAFKA_VERSION}.jar")):
            raise SystemExit(f"Maven copied no kafka_2.13-{KAFKA_VERSION}.jar into {partial}")
        Path(partial, STAMP).write_text(pom_digest(pom) + "\n")
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(partial, directory)
        Path(partial).mkdir()  # for TemporaryDirectory's clean-up
    return True


def main() -> None:
    started = time.monotonic()
    directory = cache_dir()
    if fetch(directory):
        count = len(list(directory.glob("*.jar")))
        print(
            f"Kafka {KAFKA_VERSION}: {count} jars in {directory} "
            f"({time.monotonic() - started:.0f} s)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
