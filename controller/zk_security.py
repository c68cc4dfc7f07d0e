"""Which ACLs the cluster's znodes get (Kafka's `zookeeper.set.acl`), as plain data. Pure.

Kafka's rule (ZkData.defaultAcls): with `zookeeper.set.acl=true` every znode the brokers
create gets CREATOR_ALL (all rights to the identity that created it: the brokers' digest
login) plus world READ, except under the sensitive roots (credentials and broker configs),
which get CREATOR_ALL only; without it, world ALL. The brokers must therefore all log in
with the same identity. `zk_client.ZkClient` applies this on create; the security
migration (broker/zk_security_migration.py) applies it to a tree made before, or reverts it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CLUSTER_ROOTS",
    "SENSITIVE_ROOTS",
    "Perm",
    "ZnodeAcl",
    "default_acls",
    "is_sensitive",
]


class Perm(enum.IntFlag):
    """ZooKeeper's permission bits (ZooDefs.Perms)."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


@dataclass(frozen=True, slots=True)
class ZnodeAcl:
    """One ACL entry: `scheme:id` with `perms` (scheme "auth": whoever creates or sets it)."""

    perms: Perm
    scheme: str
    id: str

    def __str__(self) -> str:
        return f"{self.scheme}:{self.id}:{self.perms!r}"


OPEN: Final = (ZnodeAcl(Perm.ALL, "world", "anyone"),)
CREATOR_ALL: Final = (ZnodeAcl(Perm.ALL, "auth", ""),)
WORLD_READ: Final = (ZnodeAcl(Perm.READ, "world", "anyone"),)

# SCRAM credentials and per-broker configs, as Kafka's ZkData.SensitiveRootPaths (its third,
# /delegation_token, does not exist here): nobody but the brokers may even read them.
SENSITIVE_ROOTS: Final = ("/config/users", "/config/brokers")

# Every top-level znode the brokers and the controller create (controller/zk_data.py and the
# zk_* modules); the migration walks these, as Kafka's ZkSecurityMigrator walks
# ZkData.SecureRootPaths, and leaves any other application's znodes alone.
CLUSTER_ROOTS: Final = (
    "/admin",
    "/brokers",
    "/cluster",
    "/config",
    "/controller",
    "/controller_epoch",
    "/isr_change_notification",
    "/kafka-acl",
    "/kafka-acl-changes",
    "/kafka-acl-extended",
    "/kafka-acl-extended-changes",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
)


def is_sensitive(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


def default_acls(path: str, secure: bool) -> tuple[ZnodeAcl, ...]:
    """The ACLs of the znode at `path` (relative to the chroot) for `zookeeper.set.acl`."""
    if not secure:
        return OPEN
    return CREATOR_ALL if is_sensitive(path) else CREATOR_ALL + WORLD_READ
