"""Set or remove the ACLs of an existing cluster's znodes: Kafka's zookeeper-security-migration.

`--zookeeper.acl secure` gives every znode under the cluster's roots (and the chroot) the ACLs
brokers with `zookeeper.set.acl=true` give the znodes they create (controller/zk_security.py);
`unsecure` gives them world ALL again. The ZooKeeper login comes from a server.properties
(`zookeeper.digest.username` / `.password`, never the command line): it must be the brokers'
own, as only that identity may then change the tree. Order, as in Kafka: to secure, give the
brokers the login and `zookeeper.set.acl=true`, restart them, then run this; to unsecure, run
this, then restart them with `zookeeper.set.acl=false`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import trio

from controller.zk_client import NoNodeError, ZkClient, ZkError
from controller.zk_security import CLUSTER_ROOTS, default_acls
from protocol.java_properties import PropertiesFormatError, property_lines

__all__ = ["MigrationResult", "ZkLogin", "main", "migrate", "read_zk_login"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
_SESSION_TIMEOUT_MS: Final = 18_000  # zookeeper.session.timeout.ms's default
_CONCURRENCY: Final = 16  # requests in flight on the one session (kazoo pipelines them)


@dataclass(frozen=True)
class ZkLogin:
    """What the tool needs from a server.properties."""

    connect: str | None
    session_timeout_ms: int = _SESSION_TIMEOUT_MS
    digest: tuple[str, str] | None = field(default=None, repr=False)


@dataclass
class MigrationResult:
    changed: int = 0  # znodes whose ACLs were set
    failed: dict[str, str] = field(default_factory=dict)  # path -> why


class LoginError(ValueError):
    """The properties file is unreadable or its ZooKeeper login is incomplete."""


def read_zk_login(path: Path) -> ZkLogin:
    """zookeeper.connect, zookeeper.session.timeout.ms and the digest login from a
    properties file; every other key is ignored (a broker's server.properties will do)."""
    try:
        text = path.read_text(encoding="utf-8")
        given = {key: value for _, key, value in property_lines(text, str(path))}
    except (OSError, UnicodeDecodeError, PropertiesFormatError) as exc:
        raise LoginError(f"cannot read {path}: {exc}") from exc
    user = given.get("zookeeper.digest.username")
    password = given.get("zookeeper.digest.password")
    if (user is None) != (password is None):
        raise LoginError(
            f"{path}: zookeeper.digest.username and zookeeper.digest.password go together"
        )
    try:
        timeout_ms = int(given.get("zookeeper.session.timeout.ms", _SESSION_TIMEOUT_MS))
    except ValueError as exc:
        raise LoginError(f"{path}: zookeeper.session.timeout.ms is not a number") from exc
    digest = None if user is None or password is None else (user, password)
    return ZkLogin(given.get("zookeeper.connect"), timeout_ms, digest)


async def migrate(zk: ZkClient, secure: bool) -> MigrationResult:
    """Set the ACLs of the chroot (if any) and of every znode under the cluster's roots."""
    result = MigrationResult()
    limiter = trio.CapacityLimiter(_CONCURRENCY)
    chrooted = bool(zk.hosts.partition("/")[2].strip("/"))

    async def set_one(path: str) -> bool:
        acls = default_acls(path, secure)  # "/" in a chroot: the chroot node (as Kafka's)
        async with limiter:
            try:
                await zk.set_acls(path, acls)
            except NoNodeError:
                return False  # gone meanwhile (an ephemeral, a consumed notification)
            except ZkError as exc:
                result.failed[path] = str(exc)
                return False
        result.changed += 1
        return True

    async def walk(path: str) -> None:
        if not await set_one(path):
            return
        async with limiter:
            try:
                children = await zk.get_children(path)
            except NoNodeError:
                return
            except ZkError as exc:
                result.failed[path] = str(exc)
                return
        async with trio.open_nursery() as nursery:
            for child in children:
                nursery.start_soon(walk, f"{path}/{child}")

    if chrooted:
        await set_one("/")
    async with trio.open_nursery() as nursery:
        for root in CLUSTER_ROOTS:
            nursery.start_soon(walk, root)
    return result


async def _run(login: ZkLogin, connect: str, secure: bool) -> MigrationResult:
    zk = await ZkClient.connect(connect, login.session_timeout_ms, digest=login.digest)
    try:
        return await migrate(zk, secure)
    finally:
        await zk.close()


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Set the ACLs of an existing cluster's znodes for zookeeper.set.acl "
        "(secure), or open them again (unsecure).",
    )
    parser.add_argument(
        "--zookeeper.acl", dest="acl", choices=("secure", "unsecure"), required=True
    )
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        help="a broker's server.properties: zookeeper.connect and the brokers' ZooKeeper "
        "login (zookeeper.digest.username, zookeeper.digest.password) are read from it",
    )
    parser.add_argument("--zookeeper.connect", dest="connect", help="instead of the file's")
    args = parser.parse_args(argv)
    try:
        login = read_zk_login(args.config)
    except LoginError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    connect = args.connect or login.connect
    if not connect:
        print("Error: no zookeeper.connect (in --config or --zookeeper.connect)", file=sys.stderr)
        return EXIT_USAGE
    secure = args.acl == "secure"
    if secure and login.digest is None:
        print(
            f"Error: {args.config} has no zookeeper.digest.username / .password: the ACLs "
            "give the znodes to that login",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        result = trio.run(_run, login, connect, secure)
    except ZkError as exc:
        print(f"Error: ZooKeeper: {exc}", file=sys.stderr)
        return EXIT_FAILED
    what = "brokers' login only" if secure else "open to everyone"
    print(f"{result.changed} znode(s) under {connect} set to {args.acl} ({what})")
    for path, why in sorted(result.failed.items()):
        print(f"Error: {path}: {why}", file=sys.stderr)
    return EXIT_FAILED if result.failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
