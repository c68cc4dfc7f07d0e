"""The Spark sink and source over SASL_SSL: Kafka's client security properties as
`kafka.`-prefixed options, as Spark's Kafka connector takes them (one secured broker, ACLs on,
the admin user)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.security_admin import upsert_user
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata
from tests.integration.secure_cluster import (
    BROKER_PASSWORD,
    Pki,
    make_pki,
    secure_cluster,
    security,
)
from tests.integration.spark_session import spark

__all__ = ["spark"]  # the session fixture, imported for this module's tests

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    cluster = secure_cluster(zookeeper.port, tmp_path_factory.mktemp("secure-spark"), 1, pki)
    cluster.start()
    try:
        trio.run(_set_up, cluster, pki)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


async def _set_up(cluster: Cluster, pki: Pki) -> None:
    port = cluster.brokers[1].port_of("EXTERNAL")
    as_broker = security(pki, "broker", BROKER_PASSWORD)

    async def up() -> bool:
        meta = await fetch_metadata(port, timeout_ms=5000, security=as_broker)
        return meta is not None and meta.controller_id >= 0

    await eventually(up, 60, "the secured broker")
    async with Admin(cluster.bootstrap_on("EXTERNAL"), security=as_broker) as admin:
        await upsert_user(admin, "admin", "admin-secret")
        await admin.create_topic("spark-secure", partitions=2, replication_factor=1)

    async def admin_logs_in() -> bool:
        return await fetch_metadata(port, security=security(pki)) is not None

    await eventually(admin_logs_in, 30, "the admin's credentials")


def _options(cluster: Cluster, pki: Pki, password: str = "admin-secret") -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": cluster.bootstrap_on("EXTERNAL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": "admin",
        "kafka.sasl.password": password,
        "kafka.ssl.truststore.location": str(pki.ca),
    }


def _error(action: Any) -> str:
    with pytest.raises(Exception) as caught:  # Spark wraps ours: checked by its text
        action()
    return str(caught.value)


def test_spark_writes_and_reads_over_sasl_ssl(cluster: Cluster, pki: Pki, spark: Any) -> None:
    options = _options(cluster, pki)
    rows = [(f"k{i}", f"v{i}") for i in range(60)]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.format("highwater").options(**options).option("topic", "spark-secure").mode(
        "append"
    ).save()
    read = (
        spark.read.format("highwater")
        .options(**options)
        .option("subscribe", "spark-secure")
        .load()
        .select("key", "value")
        .collect()
    )
    assert sorted((bytes(r["key"]).decode(), bytes(r["value"]).decode()) for r in read) == sorted(
        rows
    )

    def read_with(given: dict[str, str]) -> None:
        reader = spark.read.format("highwater").options(**given).option("subscribe", "spark-secure")
        reader.load().collect()

    plain = {"kafka.bootstrap.servers": options["kafka.bootstrap.servers"]}
    assert "a TLS or SASL listener" in _error(lambda: read_with(plain))
    assert "SASL_AUTHENTICATION_FAILED" in _error(
        lambda: read_with(_options(cluster, pki, password="wrong"))
    )
