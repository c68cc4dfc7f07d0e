"""ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them (ZkAclStore, KafkaZkClient).

LITERAL patterns live in `/kafka-acl/<Type>/<name>`, PREFIXED ones in
`/kafka-acl-extended/prefixed/<Type>/<name>`, each znode holding every entry of its pattern:
`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
"host":"*"}]}`. A change rewrites the znode (compare-and-set on its version; deleted when
empty) and adds a sequential notification, `/kafka-acl-changes/acl_changes_<n>` ("Topic:name")
or `/kafka-acl-extended-changes/acl_changes_<n>` (JSON), which every broker watches.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from typing import Final

from controller import zk_data
from controller.zk_script import (
    ZkScript,
    children_or_empty,
    delete,
    ensure_path,
    exists,
    get_data,
    multi,
)
from controller.zk_types import (
    BadVersionError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    TransactionOp,
)
from protocol.acl import (
    AccessControlEntry,
    AclOperation,
    Acls,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

__all__ = [
    "ACL_CHANGES_PATHS",
    "AclsChangedError",
    "change_acls",
    "decode_entries",
    "encode_entries",
    "purge_expired_acl_changes",
    "read_all_acls",
    "watch_acl_changes",
]

LITERAL_ROOT: Final = "/kafka-acl"
PREFIXED_ROOT: Final = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES: Final = "/kafka-acl-changes"
EXTENDED_CHANGES: Final = "/kafka-acl-extended-changes"
ACL_CHANGES_PATHS: Final = (LITERAL_CHANGES, EXTENDED_CHANGES)
CHANGE_PREFIX: Final = "acl_changes_"
CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000  # Kafka's, as for config changes

_TYPE_NAMES: Final = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
}
_TYPES: Final = {v: k for k, v in _TYPE_NAMES.items()}
_OPERATION_NAMES: Final = {
    AclOperation.ALL: "All",
    AclOperation.READ: "Read",
    AclOperation.WRITE: "Write",
    AclOperation.CREATE: "Create",
    AclOperation.DELETE: "Delete",
    AclOperation.ALTER: "Alter",
    AclOperation.DESCRIBE: "Describe",
    AclOperation.CLUSTER_ACTION: "ClusterAction",
    AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs",
    AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
}
_OPERATIONS: Final = {v: k for k, v in _OPERATION_NAMES.items()}
_PERMISSIONS: Final = {"Allow": Permission.ALLOW, "Deny": Permission.DENY}


class AclsChangedError(Exception):
    """The pattern's znode changed while it was being rewritten: read and try again."""


def pattern_path(pattern: ResourcePattern) -> str:
    root = PREFIXED_ROOT if pattern.pattern_type is PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": "Allow" if e.permission is Permission.ALLOW else "Deny",
            "operation": _OPERATION_NAMES[e.operation],
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """ZkDataError if malformed."""
    what = "ACL znode"
    try:
        obj = json.loads(data.decode())
        entries = frozenset(
            AccessControlEntry(
                _str(acl["principal"]),
                _str(acl["host"]),
                _OPERATIONS[acl["operation"]],
                _PERMISSIONS[acl["permissionType"]],
            )
            for acl in obj["acls"]
        )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise zk_data.ZkDataError(f"{what}: {exc!r}") from exc
    return entries


def _str(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def read_all_acls() -> ZkScript[tuple[Acls, list[str]]]:
    """Every stored ACL, and the znodes that could not be read (skipped)."""
    found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    malformed: list[str] = []
    for root, pattern_type in (
        (LITERAL_ROOT, PatternType.LITERAL),
        (PREFIXED_ROOT, PatternType.PREFIXED),
    ):
        for type_name in (yield from children_or_empty(root)):
            resource_type = _TYPES.get(type_name)
            if resource_type is None:
                continue  # Kafka's other resource types: none here
            for name in (yield from children_or_empty(f"{root}/{type_name}")):
                path = f"{root}/{type_name}/{name}"
                data = yield from get_data(path)
                if data is None:
                    continue
                try:
                    found[ResourcePattern(resource_type, name, pattern_type)] = decode_entries(
                        data[0]
                    )
                except zk_data.ZkDataError:
                    malformed.append(path)
    return Acls.from_patterns(found), malformed


def watch_acl_changes() -> ZkScript[list[str]]:
    """(Re-)arm the watches on both notification znodes; their children, for the purge."""
    children: list[str] = []
    for path in ACL_CHANGES_PATHS:
        children.extend(f"{path}/{c}" for c in (yield from children_or_empty(path, watch=True)))
    return children


def change_acls(
    pattern: ResourcePattern,
    change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
) -> ZkScript[tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]]:
    """Rewrite one pattern's entries with `change(old)` and notify, in one transaction; the
    (old, new) entries. AclsChangedError if another writer came first."""
    path = pattern_path(pattern)
    found = yield from get_data(path)
    old = decode_entries(found[0]) if found is not None else frozenset()
    new = change(old)
    if new == old:
        return old, new
    yield from ensure_path(path.rpartition("/")[0])
    for changes in ACL_CHANGES_PATHS:
        yield from ensure_path(changes)
    ops: list[TransactionOp]
    if found is None:
        ops = [CreateOp(path, encode_entries(new))]
    elif new:
        ops = [SetOp(path, encode_entries(new), found[1].version)]
    else:
        ops = [DeleteOp(path, found[1].version)]
    ops.append(_notification(pattern))
    try:
        yield from multi(ops)
    except (BadVersionError, NodeExistsError, NoNodeError) as exc:
        if exc.op_index != 0:
            raise
        raise AclsChangedError(f"{path} changed meanwhile") from exc
    return old, new


def _notification(pattern: ResourcePattern) -> CreateOp:
    type_name = _TYPE_NAMES[pattern.resource_type]
    if pattern.pattern_type is PatternType.LITERAL:
        return CreateOp(
            f"{LITERAL_CHANGES}/{CHANGE_PREFIX}",
            f"{type_name}:{pattern.name}".encode(),
            sequence=True,
        )
    body = {
        "version": 1,
        "resourceType": type_name,
        "name": pattern.name,
        "patternType": "PREFIXED",
    }
    return CreateOp(
        f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}",
        json.dumps(body, separators=(",", ":")).encode(),
        sequence=True,
    )


def purge_expired_acl_changes(paths: Iterable[str], now_ms: int, limit: int = 100) -> ZkScript[int]:
    """Delete notifications older than CHANGE_EXPIRATION_MS, at most `limit`; how many."""
    purged = 0
    for path in sorted(paths)[:limit]:
        stat = yield from exists(path)
        if stat is None or now_ms - stat.ctime <= CHANGE_EXPIRATION_MS:
            continue
        with contextlib.suppress(NoNodeError):
            yield from delete(path)
            purged += 1
    return purged
