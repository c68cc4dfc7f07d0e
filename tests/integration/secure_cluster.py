"""A secured cluster for integration tests: a CA and certificates made on the fly (trustme;
none committed), brokers with an INTERNAL SASL_PLAINTEXT inter-broker listener and an
EXTERNAL SASL_SSL one, SCRAM users and the ACL authorizer with `User:broker` and
`User:admin` as super users; optionally ZooKeeper ACLs (`zookeeper.set.acl`) with the brokers'
digest login."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme

from client.security import ClientSecurity
from tests.integration.cluster_harness import Cluster

__all__ = [
    "ADMIN_PASSWORD",
    "BROKER_PASSWORD",
    "ZOOKEEPER_LOGIN",
    "Pki",
    "make_pki",
    "secure_cluster",
    "security",
    "wait_for_secured_broker",
    "zookeeper_acl_settings",
]

BROKER_USER = "broker"
BROKER_PASSWORD = "broker-secret"
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-secret"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
ZOOKEEPER_LOGIN = ("zk-broker", "zk-broker-secret")  # the brokers' digest login


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA the brokers' certificates come from
    server: Path  # certificate chain + key for 127.0.0.1 and localhost
    client: Path  # a client certificate (CN=alice,OU=Dev,O=Example) from the same CA
    other_ca: Path  # a CA nobody trusts
    other_client: Path  # a client certificate from it
    expired_client: Path  # CN=alice from the trusted CA, expired yesterday


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    other = trustme.CA()
    paths = Pki(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "client.pem",
        directory / "other-ca.pem",
        directory / "other-client.pem",
        directory / "expired-client.pem",
    )
    ca.cert_pem.write_to_path(str(paths.ca))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(paths.server)
    )
    ca.issue_cert(
        "alice@example.com", common_name="alice", organization_name="Example",
        organization_unit_name="Dev",
    ).private_key_and_cert_chain_pem.write_to_path(str(paths.client))  # fmt: skip
    other.cert_pem.write_to_path(str(paths.other_ca))
    other.issue_cert(
        "mallory@example.com", common_name="mallory"
    ).private_key_and_cert_chain_pem.write_to_path(str(paths.other_client))
    now = datetime.datetime.now(datetime.UTC)
    ca.issue_cert(
        "alice@example.com", common_name="alice", organization_name="Example",
        organization_unit_name="Dev", not_before=now - datetime.timedelta(days=2),
        not_after=now - datetime.timedelta(days=1),
    ).private_key_and_cert_chain_pem.write_to_path(str(paths.expired_client))  # fmt: skip
    return paths


def zookeeper_acl_settings() -> dict[str, str]:
    """Broker settings for ZooKeeper ACLs with ZOOKEEPER_LOGIN."""
    return {
        "zookeeper.set.acl": "true",
        "zookeeper.digest.username": ZOOKEEPER_LOGIN[0],
        "zookeeper.digest.password": ZOOKEEPER_LOGIN[1],
    }


def secure_cluster(
    zookeeper_port: int,
    directory: Path,
    size: int,
    pki: Pki,
    *,
    zookeeper_acl: bool = False,
    kafka_listener: bool = False,
    settings: dict[str, str] | None = None,
) -> Cluster:
    """`kafka_listener`: a third listener, KAFKA, SASL_SSL speaking Kafka's wire
    (docs/kafka.md). `settings`: more broker settings (on top of these)."""
    overrides = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            f'{_SCRAM} required username="{BROKER_USER}" password="{BROKER_PASSWORD}";'
        ),
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.location": str(pki.ca),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        "offsets.topic.replication.factor": "1",
        **(zookeeper_acl_settings() if zookeeper_acl else {}),
        **(settings or {}),
    }
    listeners = {"INTERNAL": "SASL_PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    if kafka_listener:
        listeners["KAFKA"] = "SASL_SSL"
        overrides["listener.wire.protocol.map"] = "KAFKA:kafka"
    return Cluster(zookeeper_port, directory, size, overrides, listeners=listeners)


def security(
    pki: Pki,
    user: str = ADMIN_USER,
    password: str = ADMIN_PASSWORD,
    *,
    mechanism: str = "SCRAM-SHA-512",
    protocol: str = "SASL_SSL",
) -> ClientSecurity:
    return ClientSecurity(
        protocol=protocol,
        sasl_mechanism=mechanism,
        username=user,
        password=password,
        ssl_cafile=str(pki.ca) if "SSL" in protocol else None,
    )


async def wait_for_secured_broker(cluster: Cluster, pki: Pki, broker_id: int = 1) -> ClientSecurity:
    """Once broker `broker_id` answers Metadata on EXTERNAL as the broker user and knows a
    controller; that login (a super user), for the test's own set-up."""
    from tests.integration.cluster_harness import eventually, fetch_metadata

    port = cluster.brokers[broker_id].port_of("EXTERNAL")
    as_broker = security(pki, BROKER_USER, BROKER_PASSWORD)

    async def up() -> bool:
        meta = await fetch_metadata(port, timeout_ms=5000, security=as_broker)
        return meta is not None and meta.controller_id >= 0

    await eventually(up, 60, "the secured broker")
    return as_broker
