"""Mutual TLS: one broker whose SSL listener requires client certificates. The principal is
the certificate's subject; a certificate from an unknown CA, an expired one, or none, is
refused."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.network import AuthenticationFailedError, BrokerConnectionError, connect
from client.security import ClientSecurity
from client.security_admin import Acl, create_acls
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata
from tests.integration.secure_cluster import Pki, make_pki

pytestmark = pytest.mark.timeout(300)
ALICE = "User:CN=alice,OU=Dev,O=Example"  # the subject of secure_cluster's client certificate


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[Cluster]:
    cluster = Cluster(
        zookeeper.port,
        tmp_path_factory.mktemp("mtls"),
        1,
        {
            "ssl.keystore.location": str(pki.server),
            "ssl.truststore.location": str(pki.ca),
            "ssl.client.auth": "required",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # The broker's own principal on the PLAINTEXT inter-broker listener.
            "super.users": "User:ANONYMOUS",
        },
        listeners={"INTERNAL": "PLAINTEXT", "MTLS": "SSL"},
    )
    cluster.start()
    try:

        async def up() -> bool:
            meta = await fetch_metadata(cluster.brokers[1].port)
            return meta is not None and meta.controller_id >= 0

        trio.run(eventually, up, 60, "the broker")
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def tls(pki: Pki, certificate: str | None, ca: str | None = None) -> ClientSecurity:
    return ClientSecurity(protocol="SSL", ssl_cafile=ca or str(pki.ca), ssl_certfile=certificate)


async def test_the_certificate_subject_is_the_principal(cluster: Cluster, pki: Pki) -> None:
    broker = cluster.brokers[1]
    async with Admin(f"127.0.0.1:{broker.port}") as admin:  # ANONYMOUS on INTERNAL: super user
        await admin.create_topic("certified", partitions=1, replication_factor=1)
        await create_acls(
            admin,
            [
                Acl(
                    "TOPIC",
                    "certified",
                    "LITERAL",
                    "User:CN=alice,OU=Dev,O=Example",
                    "*",
                    "DESCRIBE",
                    "ALLOW",
                )
            ],
        )
    alice = tls(pki, str(pki.client))

    async def described() -> bool:
        conn = await connect("127.0.0.1", broker.port_of("MTLS"), security=alice)
        try:
            meta: MetadataResponse = await conn.request(MetadataRequest(["certified"]))
        finally:
            await conn.aclose()
        return meta.topics[0].error_code == ErrorCode.NONE

    await eventually(described, 30, "the certificate subject allowed to describe the topic")
    assert f'"principal": "{ALICE}"' in broker.log_text()


@pytest.mark.parametrize(
    "which", ["no certificate", "an unknown CA's certificate", "an expired certificate"]
)
async def test_a_missing_untrusted_or_expired_client_certificate_is_refused(
    cluster: Cluster, pki: Pki, which: str
) -> None:
    certificate = {
        "no certificate": None,
        "an unknown CA's certificate": str(pki.other_client),
        "an expired certificate": str(pki.expired_client),
    }[which]
    with pytest.raises((AuthenticationFailedError, BrokerConnectionError)):
        conn = await connect(
            "127.0.0.1", cluster.brokers[1].port_of("MTLS"), security=tls(pki, certificate)
        )
        # TLS 1.3 reports a refused client certificate after the handshake: at the first read.
        await conn.request(MetadataRequest(None), timeout_ms=5000)


async def test_an_untrusted_server_certificate_is_refused_by_the_client(
    cluster: Cluster, pki: Pki
) -> None:
    with pytest.raises(AuthenticationFailedError, match="TLS handshake failed"):
        await connect(
            "127.0.0.1",
            cluster.brokers[1].port_of("MTLS"),
            security=tls(pki, str(pki.client), ca=str(pki.other_ca)),
        )


def test_the_cli_reads_command_config(cluster: Cluster, pki: Pki, tmp_path: Path) -> None:
    """--command-config with Kafka's property names: the same refusal, as one line."""
    config = tmp_path / "client.properties"
    config.write_text(
        f"security.protocol=SSL\nssl.truststore.location={pki.ca}\n"
        f"ssl.keystore.location={pki.other_client}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", "topics", "list", "--command-config", str(config),
         "-b", f"127.0.0.1:{cluster.brokers[1].port_of('MTLS')}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("Error:")
