"""Users' SCRAM credentials and ACLs through any broker (Kafka's Admin.alterUserScramCredentials,
describeUserScramCredentials, createAcls, describeAcls, deleteAcls), over an `Admin`.

Names are Kafka's (TOPIC, GROUP, CLUSTER; LITERAL, PREFIXED; READ, WRITE, ...), sent as Kafka's
codes. A password never leaves the client: its salted hash does (KIP-554).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from scramp.utils import saslprep

from client.admin import Admin
from client.errors import error_for_code
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import AclFilterSpec, DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

__all__ = [
    "OPERATIONS",
    "PATTERN_TYPES",
    "RESOURCE_TYPES",
    "SCRAM_MECHANISMS",
    "Acl",
    "AclQuery",
    "create_acls",
    "delete_acls",
    "delete_user",
    "describe_acls",
    "describe_users",
    "upsert_user",
]

# Kafka's codes.
RESOURCE_TYPES: Final = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4}
PATTERN_TYPES: Final = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS: Final = {
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
}
PERMISSIONS: Final = {"ANY": 1, "DENY": 2, "ALLOW": 3}
SCRAM_MECHANISMS: Final = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_NAMES: Final = {
    "resource": {v: k for k, v in RESOURCE_TYPES.items()},
    "pattern": {v: k for k, v in PATTERN_TYPES.items()},
    "operation": {v: k for k, v in OPERATIONS.items()},
    "permission": {v: k for k, v in PERMISSIONS.items()},
}


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ACL binding, by Kafka's names: e.g. TOPIC orders LITERAL User:alice * READ ALLOW."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:
        return (
            f"{self.permission} {self.principal} {self.operation} from {self.host} on "
            f"{self.resource_type}:{self.pattern_type}:{self.resource_name}"
        )


@dataclass(frozen=True, slots=True)
class AclQuery:
    """Which bindings to list or remove (None, ANY: everything; MATCH: the patterns that
    apply to the named resource)."""

    resource_type: str = "ANY"
    resource_name: str | None = None
    pattern_type: str = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: str = "ANY"
    permission: str = "ANY"

    def spec(self) -> AclFilterSpec:
        return AclFilterSpec(
            RESOURCE_TYPES[self.resource_type],
            self.resource_name,
            PATTERN_TYPES[self.pattern_type],
            self.principal,
            self.host,
            OPERATIONS[self.operation],
            PERMISSIONS[self.permission],
        )


def _named(kind: str, code: int) -> str:
    return _NAMES[kind].get(code, f"UNKNOWN({code})")


async def create_acls(admin: Admin, acls: Sequence[Acl]) -> None:
    """Add the bindings; the first refusal is raised (e.g. CLUSTER_AUTHORIZATION_FAILED)."""
    request = CreateAclsRequest(
        tuple(
            AclCreation(
                RESOURCE_TYPES[a.resource_type],
                a.resource_name,
                PATTERN_TYPES[a.pattern_type],
                a.principal,
                a.host,
                OPERATIONS[a.operation],
                PERMISSIONS[a.permission],
            )
            for a in acls
        )
    )
    response: CreateAclsResponse = await admin.send(request)
    for acl, result in zip(acls, response.results, strict=True):
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(result.error_code, f"add ACL {acl}", result.error_message)


async def describe_acls(admin: Admin, query: AclQuery = AclQuery()) -> list[Acl]:
    response: DescribeAclsResponse = await admin.send(DescribeAclsRequest(query.spec()))
    if response.error_code != ErrorCode.NONE:
        raise error_for_code(response.error_code, "list ACLs", response.error_message)
    return sorted(
        Acl(
            _named("resource", r.resource_type),
            r.resource_name,
            _named("pattern", r.pattern_type),
            a.principal,
            a.host,
            _named("operation", a.operation),
            _named("permission", a.permission_type),
        )
        for r in response.resources
        for a in r.acls
    )


async def delete_acls(admin: Admin, queries: Sequence[AclQuery]) -> list[Acl]:
    """Remove every binding the queries match; those removed."""
    response: DeleteAclsResponse = await admin.send(
        DeleteAclsRequest(tuple(q.spec() for q in queries))
    )
    removed: list[Acl] = []
    for result in response.filter_results:
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(result.error_code, "remove ACLs", result.error_message)
        removed.extend(
            Acl(
                _named("resource", m.resource_type),
                m.resource_name,
                _named("pattern", m.pattern_type),
                m.principal,
                m.host,
                _named("operation", m.operation),
                _named("permission", m.permission_type),
            )
            for m in result.matching_acls
        )
    return sorted(removed)


async def upsert_user(
    admin: Admin,
    user: str,
    password: str,
    mechanisms: Iterable[str] = tuple(SCRAM_MECHANISMS),
    iterations: int = 4096,
) -> None:
    """Add or replace the user's credentials (a new random salt per mechanism)."""
    upsertions = []
    for mechanism in mechanisms:
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(
            _HASHES[mechanism], saslprep(password).encode(), salt, iterations
        )
        upsertions.append(
            ScramCredentialUpsertion(user, SCRAM_MECHANISMS[mechanism], iterations, salt, salted)
        )
    await _alter(admin, AlterUserScramCredentialsRequest((), tuple(upsertions)))


async def delete_user(
    admin: Admin, user: str, mechanisms: Iterable[str] = tuple(SCRAM_MECHANISMS)
) -> None:
    deletions = tuple(ScramCredentialDeletion(user, SCRAM_MECHANISMS[m]) for m in mechanisms)
    await _alter(admin, AlterUserScramCredentialsRequest(deletions, ()))


async def _alter(admin: Admin, request: AlterUserScramCredentialsRequest) -> None:
    response: AlterUserScramCredentialsResponse = await admin.send(request)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(
                result.error_code, f"change the credentials of {result.user}", result.error_message
            )


async def describe_users(
    admin: Admin, users: Sequence[str] | None = None
) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism, iterations)]; every user with credentials if `users` is None."""
    response: DescribeUserScramCredentialsResponse = await admin.send(
        DescribeUserScramCredentialsRequest(None if users is None else tuple(users))
    )
    if response.error_code != ErrorCode.NONE:
        raise error_for_code(response.error_code, "list users", response.error_message)
    names = {v: k for k, v in SCRAM_MECHANISMS.items()}
    found = {}
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(result.error_code, f"describe {result.user}", result.error_message)
        found[result.user] = [
            (names.get(c.mechanism, str(c.mechanism)), c.iterations)
            for c in result.credential_infos
        ]
    return found
