"""`highwater dev up --secure`: what makes the local cluster a secured one.

A CA and a certificate for 127.0.0.1/localhost made with the `openssl` command in
`<dir>/tls/`; a broker user with a random password in `<dir>/tls/passwords.properties`; listeners
CLIENT (SASL_SSL, the ports clients bootstrap from) and INTERNAL (SASL_PLAINTEXT, between
brokers); ACLs on, with `User:broker` and `User:admin` as super users; ZooKeeper ACLs
(`zookeeper.set.acl`) with the brokers' digest login, whose password is in the same file and,
with `zookeeper.connect`, in `<dir>/tls/zookeeper.properties` (what
`highwater zookeeper-security-migration --config` reads); and, once the brokers answer, the
admin user and `<dir>/client.properties` (Kafka's client properties) for the CLI.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Final

from client.cli.properties import read_properties_file
from client.security import ClientSecurity

__all__ = [
    "ADMIN_USER",
    "BROKER_USER",
    "SecureSetupError",
    "admin_security",
    "broker_security",
    "broker_settings",
    "client_properties_path",
    "ensure_secrets",
    "write_client_properties",
    "write_private",
    "write_zookeeper_properties",
    "zookeeper_properties_path",
]

BROKER_USER: Final = "broker"
ADMIN_USER: Final = "admin"
# The brokers' ZooKeeper digest login: its name, and its key in passwords.properties.
ZOOKEEPER_USER: Final = "broker"
_ZOOKEEPER_KEY: Final = "zookeeper"
_SCRAM: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
_DAYS: Final = "825"


class SecureSetupError(RuntimeError):
    """The certificates or secrets could not be made."""


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read or write (0600 whatever the umask): it holds a
    password. A file already there is narrowed to 0600 before the text goes in."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(text)


def _tls(root: Path) -> Path:
    return root / "tls"


def client_properties_path(root: Path) -> Path:
    return root / "client.properties"


def zookeeper_properties_path(root: Path) -> Path:
    return _tls(root) / "zookeeper.properties"


def ensure_secrets(root: Path) -> None:
    """The CA, the brokers' certificate and the three passwords (made once, kept after; a
    directory from before ZooKeeper ACLs gets its ZooKeeper password added)."""
    tls = _tls(root)
    tls.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not (tls / "server.pem").exists():
        _make_certificates(tls)
    secrets_file = tls / "passwords.properties"
    passwords = read_properties_file(secrets_file) if secrets_file.exists() else {}
    wanted = (BROKER_USER, ADMIN_USER, _ZOOKEEPER_KEY)
    if any(key not in passwords for key in wanted):
        for key in wanted:
            passwords.setdefault(key, secrets.token_urlsafe(18))
        write_private(secrets_file, "".join(f"{k}={v}\n" for k, v in passwords.items()))


def _password(root: Path, user: str) -> str:
    return read_properties_file(_tls(root) / "passwords.properties")[user]


def _make_certificates(tls: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SecureSetupError(
            "--secure makes its certificates with the openssl command: install it"
        )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (tls / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    steps = [
        [openssl, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", _DAYS,
         "-subj", "/CN=Highwater dev CA"],
        [openssl, "req", *ec, "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=localhost"],
        [openssl, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "server.crt", "-days", _DAYS, "-extfile", "san.ext"],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run(step, cwd=tls, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SecureSetupError(f"openssl failed: {done.stderr.strip()}")
    chain = (tls / "server.crt").read_text() + (tls / "server.key").read_text()
    write_private(tls / "server.pem", chain)


def broker_settings(root: Path, client_listener: str, internal_listener: str) -> dict[str, str]:
    """server.properties additions for a broker of the secured cluster."""
    tls = _tls(root)
    password = _password(root, BROKER_USER)
    return {
        "listeners": f"CLIENT://{client_listener},INTERNAL://{internal_listener}",
        "advertised.listeners": f"CLIENT://{client_listener},INTERNAL://{internal_listener}",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{_SCRAM} required username="{BROKER_USER}" password="{password}";',
        "ssl.keystore.location": str(tls / "server.pem"),
        "ssl.truststore.location": str(tls / "ca.pem"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        **_zookeeper_login(root),
        "zookeeper.set.acl": "true",
    }


def _zookeeper_login(root: Path) -> dict[str, str]:
    return {
        "zookeeper.digest.username": ZOOKEEPER_USER,
        "zookeeper.digest.password": _password(root, _ZOOKEEPER_KEY),
    }


def write_zookeeper_properties(root: Path, zookeeper_connect: str) -> Path:
    """The brokers' ZooKeeper login, for `highwater zookeeper-security-migration --config`."""
    path = zookeeper_properties_path(root)
    lines = [
        "# Written by `highwater dev up --secure`: the brokers' ZooKeeper login.",
        f"zookeeper.connect={zookeeper_connect}",
        *(f"{key}={value}" for key, value in _zookeeper_login(root).items()),
    ]
    write_private(path, "\n".join(lines) + "\n")
    return path


def broker_security(root: Path) -> ClientSecurity:
    """The brokers' own login on the CLIENT listener (what `dev up` probes and sets up with)."""
    return _security(root, BROKER_USER)


def admin_security(root: Path) -> ClientSecurity:
    return _security(root, ADMIN_USER)


def _security(root: Path, user: str) -> ClientSecurity:
    return ClientSecurity(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        username=user,
        password=_password(root, user),
        ssl_cafile=str(_tls(root) / "ca.pem"),
    )


def write_client_properties(root: Path) -> Path:
    """Kafka's client properties for the admin user, for --command-config."""
    path = client_properties_path(root)
    write_private(
        path,
        "# Written by `highwater dev up --secure`: the admin user (a super user).\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={ADMIN_USER}\n"
        f"sasl.password={_password(root, ADMIN_USER)}\n"
        f"ssl.truststore.location={_tls(root) / 'ca.pem'}\n",
    )
    return path
