"""The simulation's model of Kafka's ACL rules (auth_invariants.model_allows) is itself right
on the cases that decide: a test oracle must not share the core's mistakes."""

from __future__ import annotations

import pytest

from protocol.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from tests.simulation.auth_invariants import model_allows

ALLOW, DENY = Permission.ALLOW, Permission.DENY
HOST = "10.0.0.7"


def acl(
    name: str,
    operation: AclOperation,
    permission: Permission = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


READ, WRITE = AclOperation.READ, AclOperation.WRITE


@pytest.mark.parametrize(
    ("bindings", "principal", "operation", "name", "allowed"),
    [
        ([], "User:alice", "READ", "t", False),  # no ACL: allow.everyone.if.no.acl.found=false
        ([], "User:admin", "WRITE", "t", True),  # a super user
        ([acl("t", READ, DENY, "User:admin")], "User:admin", "READ", "t", True),
        ([acl("t", READ)], "User:alice", "READ", "t", True),
        ([acl("t", READ)], "User:alice", "WRITE", "t", False),
        ([acl("t", READ)], "User:bob", "READ", "t", False),  # another's ACL applies: no grant
        ([acl("t", READ)], "User:alice", "DESCRIBE", "t", True),  # READ implies DESCRIBE
        ([acl("t", AclOperation.ALL)], "User:alice", "WRITE", "t", True),
        ([acl("t", READ), acl("t", READ, DENY)], "User:alice", "READ", "t", False),  # deny wins
        ([acl("t", READ), acl("*", AclOperation.ALL, DENY)], "User:alice", "READ", "t", False),
        ([acl("t", READ, DENY, "User:*")], "User:alice", "READ", "t", False),
        ([acl("*", WRITE, principal="User:*")], "User:bob", "WRITE", "t", True),
        ([acl("t", WRITE, pattern=PatternType.PREFIXED)], "User:alice", "WRITE", "tx", True),
        ([acl("tx", WRITE, pattern=PatternType.PREFIXED)], "User:alice", "WRITE", "t", False),
        ([acl("t", WRITE, host="10.9.9.9")], "User:alice", "WRITE", "t", False),
        ([acl("t", WRITE, host=HOST)], "User:alice", "WRITE", "t", True),
        ([acl("t", READ, DENY, host="10.9.9.9"), acl("t", READ)], "User:alice", "READ", "t", True),
        ([acl("t", WRITE, DENY), acl("t", READ)], "User:alice", "READ", "t", True),
        (
            [acl("kafka-cluster", AclOperation.ALTER, resource_type=ResourceType.CLUSTER)],
            "User:alice",
            "ALTER",
            "t",
            False,  # a CLUSTER ACL says nothing about topic t
        ),
    ],
)
def test_the_model(
    bindings: list[AclBinding], principal: str, operation: str, name: str, allowed: bool
) -> None:
    assert model_allows(bindings, principal, HOST, operation, "TOPIC", name) is allowed
