"""Kafka 3.9's broker and tools jars, and Spark's Kafka connector, with their runtime
dependencies, copied by Maven from the poms beside this file into cache directories once per
machine; `python -m tests.benchmarks.kafka.jars` (what `make kafka-jars` runs) fetches them
where missing and does nothing where cached."""

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
SPARK_POM = Path(__file__).with_name("spark-kafka-pom.xml")
# What Spark needs beside the installed PySpark for format("kafka") (spark.jars).
SPARK_KAFKA_JARS = (
    "spark-sql-kafka-0-10_2.13-*.jar",
    "spark-token-provider-kafka-0-10_2.13-*.jar",
    "kafka-clients-*.jar",
    "commons-pool2-*.jar",
)
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


def spark_cache_dir() -> Path:
    """Beside cache_dir(): ~/.cache/highwater/spark-kafka."""
    return cache_dir().with_name("spark-kafka")


def spark_kafka_jars(directory: Path | None = None) -> str | None:
    """spark.jars for format("kafka"), or None where `make kafka-jars` has not fetched them."""
    directory = directory or spark_cache_dir()
    if not cached(directory, SPARK_POM):
        return None
    return ",".join(str(jar) for pattern in SPARK_KAFKA_JARS for jar in directory.glob(pattern))


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


def fetch(
    directory: Path | None = None, pom: Path = POM, marker: str = f"kafka_2.13-{KAFKA_VERSION}.jar"
) -> bool:
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
        if not any(Path(partial).glob(marker)):
            raise SystemExit(f"Maven copied no {marker} into {partial}")
        Path(partial, STAMP).write_text(pom_digest(pom) + "\n")
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(partial, directory)
        Path(partial).mkdir()  # for TemporaryDirectory's clean-up
    return True


def main() -> None:
    for what, directory, pom, marker in (
        (f"Kafka {KAFKA_VERSION}", cache_dir(), POM, f"kafka_2.13-{KAFKA_VERSION}.jar"),
        ("Spark's Kafka connector", spark_cache_dir(), SPARK_POM, "spark-sql-kafka-0-10_*.jar"),
    ):
        started = time.monotonic()
        if fetch(directory, pom, marker):
            count = len(list(directory.glob("*.jar")))
            print(
                f"{what}: {count} jars in {directory} ({time.monotonic() - started:.0f} s)",
                file=sys.stderr,
            )


if __name__ == "__main__":
    main()
