"""The secured local cluster as a person uses it: `highwater dev up --secure` (one broker), then
`highwater users`, `highwater acls`, produce and consume with client properties files, each
refusal one line on stderr; its ZooKeeper is closed to anyone but the brokers."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from client.cli.zookeeper_server import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class SecureDev:
    root: Path
    bootstrap: str
    admin: Path  # the client.properties `dev up --secure` wrote
    internal_port: int  # the SASL_PLAINTEXT inter-broker listener
    printed: str  # what `dev up --secure` printed
    zookeeper: str  # its ZooKeeper's host:port

    def run(
        self,
        *args: str,
        config: Path | None = None,
        stdin: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HIGHWATER_BOOTSTRAP": self.bootstrap, **(extra_env or {})}
        env.pop("HIGHWATER_COMMAND_CONFIG", None)
        if config is not None:
            env["HIGHWATER_COMMAND_CONFIG"] = str(config)
        return _highwater(*args, env=env, stdin=stdin)

    def properties(self, user: str, password: str) -> Path:
        path = self.root.parent / f"{user}-{password}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
            f"sasl.username={user}\nsasl.password={password}\n"
            f"ssl.truststore.location={self.root / 'tls' / 'ca.pem'}\n"
        )
        return path


def _highwater(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _two_free_ports() -> int:
    """A port p with p + 1 free too (the broker's CLIENT and INTERNAL listeners)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    pytest.fail("no two consecutive free ports")


def _until(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.2)


def _one_line_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("Error:"), done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.fixture
def dev(tmp_path: Path, zookeeper_available: None) -> Iterator[SecureDev]:
    root = tmp_path / "cluster"
    base, zk_port = _two_free_ports(), free_port()
    up = _highwater(
        "dev", "up", "--secure", "--dir", str(root), "--brokers", "1",
        "--base-port", str(base), "--zk-port", str(zk_port),
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield SecureDev(
            root,
            f"127.0.0.1:{base}",
            root / "client.properties",
            base + 1,
            up.stdout + up.stderr,
            f"127.0.0.1:{zk_port}",
        )
    finally:
        _highwater("dev", "down", "--dir", str(root))


def test_secrets_are_owner_only_files_and_never_printed(dev: SecureDev) -> None:
    """The broker's server.properties holds its super user's password: 0600, as the other
    secrets. `dev up` names the client properties file rather than print the password."""
    passwords = (dev.root / "tls" / "passwords.properties").read_text()
    admin_password = passwords.split("admin=", 1)[1].splitlines()[0]
    broker_password = passwords.split("broker=", 1)[1].splitlines()[0]
    zookeeper_password = passwords.split("zookeeper=", 1)[1].splitlines()[0]
    assert (
        f'password="{broker_password}"' in (dev.root / "broker-1" / "server.properties").read_text()
    )
    for secret in (
        dev.root / "broker-1" / "server.properties",
        dev.root / "client.properties",
        dev.root / "tls" / "passwords.properties",
        dev.root / "tls" / "server.pem",
        dev.root / "tls" / "zookeeper.properties",
    ):
        assert secret.stat().st_mode & 0o777 == 0o600, secret
    assert admin_password not in dev.printed and broker_password not in dev.printed
    assert zookeeper_password not in dev.printed
    assert zookeeper_password not in (dev.root / "broker-1" / "broker.log").read_text()
    assert str(dev.admin) in dev.printed, dev.printed
    assert "sasl.password" not in dev.printed


def test_only_the_brokers_may_change_the_secured_local_clusters_zookeeper(
    dev: SecureDev,
) -> None:
    """The review's probe 20: an anonymous ZooKeeper client overwrote the admin's credential.
    `dev up --secure` sets zookeeper.set.acl: refused, and the credential is unreadable."""
    zk = KazooClient(hosts=dev.zookeeper, timeout=5.0)
    zk.start(timeout=10)
    try:
        with pytest.raises(NoAuthError):
            zk.set("/config/users/admin", b'{"SCRAM-SHA-512":"planted"}')
        with pytest.raises(NoAuthError):
            zk.get("/config/users/admin")
        with pytest.raises(NoAuthError):
            zk.set("/controller", b'{"brokerid":99}')
    finally:
        zk.stop()
        zk.close()
    assert "ZooKeeper ACLs:" in dev.printed and "set to secure" in dev.printed
    assert dev.run("topics", "list", config=dev.admin).returncode == 0


def test_users_acls_produce_and_consume_on_a_secured_local_cluster(dev: SecureDev) -> None:
    admin = dev.admin
    printed = admin.read_text()
    assert "security.protocol=SASL_SSL" in printed and "sasl.username=admin" in printed

    # The password from the environment, as documented (not on the command line, where the
    # process list shows it).
    added = dev.run(
        "users", "add", "alice", config=admin, extra_env={"HIGHWATER_USER_PASSWORD": "alice-secret"}
    )
    assert added.returncode == 0, added.stderr
    assert "Credentials of user alice set (SCRAM-SHA-256, SCRAM-SHA-512)." in added.stderr
    listed = dev.run("users", "list", "--json", config=admin)
    assert listed.returncode == 0, listed.stderr
    users = json.loads(listed.stdout)
    assert users["alice"] == [
        {"iterations": 4096, "mechanism": "SCRAM-SHA-256"},
        {"iterations": 4096, "mechanism": "SCRAM-SHA-512"},
    ]
    assert {"admin", "broker"} <= set(users)
    assert "alice-secret" not in listed.stdout

    created = dev.run(
        "topics", "create", "demo", "--partitions", "1", "--replication-factor", "1", config=admin
    )
    assert created.returncode == 0, created.stderr
    alice = dev.properties("alice", "alice-secret")

    # No ACL yet: Metadata hides the topic from alice, and her producer says so at once.
    refused = dev.run("produce", "demo", config=alice, stdin="never\n")
    _one_line_error(refused, "User:alice may not WRITE topic demo (TOPIC_AUTHORIZATION_FAILED)")

    granted = dev.run(
        "acls", "add", "--allow-principal", "User:alice", "--producer", "--topic", "demo",
        config=admin,
    )  # fmt: skip
    assert granted.returncode == 0, granted.stderr
    assert "Added: ALLOW User:alice WRITE from * on TOPIC:LITERAL:demo" in granted.stdout
    bindings = dev.run("acls", "list", "--principal", "User:alice", "--json", config=admin)
    assert bindings.returncode == 0, bindings.stderr
    assert sorted(b["operation"] for b in json.loads(bindings.stdout)) == [
        "CREATE",
        "DESCRIBE",
        "WRITE",
    ]

    # The ACL change reaches the broker through ZooKeeper: produce once it lets alice in.
    _until(
        lambda: dev.run("produce", "demo", config=alice, stdin="one\ntwo\n").returncode == 0,
        30,
        "alice's WRITE to apply",
    )
    read = dev.run("consume", "demo", "--from-beginning", "-e", config=admin)
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == ["one", "two"]  # nothing from the refused attempts

    # bob reads in a consumer group: the coordinator's connection is secured too, and what he
    # printed is committed, so the next run starts after it.
    assert dev.run("users", "add", "bob", "--password", "bob-secret", config=admin).returncode == 0
    reader = dev.run(
        "acls", "add", "--allow-principal", "User:bob", "--consumer", "--topic", "demo",
        "--group", "readers", config=admin,
    )  # fmt: skip
    assert "Added: ALLOW User:bob READ from * on GROUP:LITERAL:readers" in reader.stdout
    bob = dev.properties("bob", "bob-secret")
    in_group: list[subprocess.CompletedProcess[str]] = []

    read_in_group = ("consume", "demo", "--group", "readers", "--from-beginning")

    def bob_reads() -> bool:
        in_group.append(dev.run(*read_in_group, "--max-messages", "2", config=bob))
        return in_group[-1].returncode == 0

    _until(bob_reads, 30, "bob's READ on the topic and the group to apply")
    assert in_group[-1].stdout.splitlines() == ["one", "two"], in_group[-1].stderr
    again = dev.run("consume", "demo", "--group", "readers", "-e", config=bob)
    assert again.returncode == 0 and again.stdout == "", again.stderr
    groups = dev.run("groups", "list", config=admin)
    assert groups.returncode == 0 and "readers" in groups.stdout, groups.stderr

    # alice may write, not read.
    unread = dev.run("consume", "demo", "--from-beginning", "-e", config=alice)
    assert "TOPIC_AUTHORIZATION_FAILED" in unread.stderr and unread.stdout == ""

    _one_line_error(
        dev.run("topics", "list", config=dev.properties("alice", "wrong")),
        "SASL_AUTHENTICATION_FAILED",
    )
    _one_line_error(
        dev.run("topics", "list", config=dev.properties("nobody", "alice-secret")),
        "SASL_AUTHENTICATION_FAILED",
    )
    for port in (dev.bootstrap, f"127.0.0.1:{dev.internal_port}"):  # TLS, then SASL
        _one_line_error(dev.run("topics", "list", "-b", port), "a TLS or SASL listener")

    # A DENY on a prefix wins over alice's ALLOW; removing it with --deny-principal leaves
    # her ALLOW bindings.
    denied = dev.run(
        "acls", "add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "de",
        "--resource-pattern-type", "prefixed", config=admin,
    )  # fmt: skip
    assert denied.returncode == 0, denied.stderr
    _until(
        lambda: dev.run("produce", "demo", config=alice, stdin="x\n").returncode == 1,
        30,
        "the DENY to apply",
    )
    removed = dev.run(
        "acls", "remove", "--deny-principal", "User:alice", "--topic", "de",
        "--resource-pattern-type", "prefixed", "--force", config=admin,
    )  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines() == [
        "Removed: DENY User:alice WRITE from * on TOPIC:PREFIXED:de"
    ]
    # --deny-principal removes DENY bindings only (kafka-acls): her ALLOWs on demo stay.
    kept = dev.run(
        "acls", "remove", "--deny-principal", "User:alice", "--topic", "demo", "--force",
        config=admin,
    )  # fmt: skip
    assert kept.returncode == 0 and kept.stdout == "" and "0 ACLs removed" in kept.stderr
    left = dev.run("acls", "list", "--principal", "User:alice", "--json", config=admin)
    assert len(json.loads(left.stdout)) == 3
    _until(
        lambda: dev.run("produce", "demo", config=alice, stdin="last\n").returncode == 0,
        30,
        "the DENY to be gone",
    )

    deleted = dev.run("users", "delete", "alice", config=admin)
    assert deleted.returncode == 0, deleted.stderr
    _until(
        lambda: "SASL_AUTHENTICATION_FAILED" in dev.run("topics", "list", config=alice).stderr,
        30,
        "alice's credentials to be gone",
    )
    # Written: the first two, an "x" for each attempt before the DENY reached the broker, and
    # "last" once (the attempts while the DENY held wrote nothing).
    final = dev.run("consume", "demo", "--from-beginning", "-e", config=admin).stdout.split()
    assert final[:2] == ["one", "two"] and final[-1] == "last"
    assert set(final[2:-1]) <= {"x"}


def _printed_grant(refused: subprocess.CompletedProcess[str]) -> list[str]:
    """The `highwater acls add ...` a refusal printed, as arguments for `dev.run`."""
    command = shlex.split(refused.stderr.split("`")[1])
    assert command[:3] == ["highwater", "acls", "add"], refused.stderr
    return command[1:]


def test_a_refused_user_is_told_the_grant_and_running_it_lets_her_in(dev: SecureDev) -> None:
    """alice, with the client properties `users add` wrote for her, is refused: each refusal
    names her, the operation and the resource, and the `acls add` that fixes it; that command,
    run by the admin exactly as printed, lets her produce, then consume in a group."""
    alice = dev.root.parent / "alice.properties"
    added = dev.run(
        "users", "add", "alice", "--write-client-properties", str(alice), config=dev.admin,
        extra_env={"HIGHWATER_USER_PASSWORD": "alice-secret"},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout == f"Client properties of user alice written to {alice} (mode 0600).\n"
    assert "alice-secret" not in added.stdout + added.stderr
    assert alice.stat().st_mode & 0o777 == 0o600
    created = dev.run(
        "topics", "create", "sec", "--partitions", "1", "--replication-factor", "1",
        config=dev.admin,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr

    unwritten = dev.run("produce", "sec", config=alice, stdin="one\ntwo\n")
    _one_line_error(
        unwritten,
        "Error: User:alice may not WRITE topic sec (TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --producer --topic sec`",
    )
    assert dev.run(*_printed_grant(unwritten), config=dev.admin).returncode == 0
    _until(
        lambda: dev.run("produce", "sec", config=alice, stdin="one\ntwo\n").returncode == 0,
        30,
        "alice's WRITE to apply",
    )

    read_in_group = ("consume", "sec", "--group", "ag", "--from-beginning", "-e")
    unread = dev.run(*read_in_group, config=alice)
    _one_line_error(
        unread,
        "Error: User:alice may not READ group ag (and topic sec; GROUP_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --consumer --topic sec --group ag`",
    )
    assert unread.stdout == ""
    granted = dev.run(*_printed_grant(unread), config=dev.admin)
    assert granted.returncode == 0, granted.stderr
    assert "Added: ALLOW User:alice READ from * on GROUP:LITERAL:ag" in granted.stdout
    reads: list[subprocess.CompletedProcess[str]] = []

    def alice_reads() -> bool:
        reads.append(dev.run(*read_in_group, config=alice))
        return reads[-1].returncode == 0

    _until(alice_reads, 30, "alice's READ on the topic and the group to apply")
    assert reads[-1].stdout.splitlines() == ["one", "two"], reads[-1].stderr
