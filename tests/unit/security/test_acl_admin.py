"""CreateAcls and DeleteAcls as planned by broker.core.acl_admin for the handlers and the
simulator: refused whole without ALTER on the cluster, a bad binding or filter answered
INVALID_REQUEST, the rest written one pattern change at a time."""

from __future__ import annotations

from broker.core.acl_admin import (
    FilterDeletion,
    PatternChange,
    plan_creations,
    plan_deletions,
)
from protocol.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, AclCreationResult, CreateAclsRequest
from protocol.messages.delete_acls import DeleteAclsFilterResult, DeleteAclsRequest
from protocol.messages.describe_acls import AclFilterSpec

TOPIC = ResourcePattern(ResourceType.TOPIC, "orders")
ALICE_READS = AccessControlEntry("User:alice", "*", AclOperation.READ, Permission.ALLOW)
BOB_READS = AccessControlEntry("User:bob", "*", AclOperation.READ, Permission.ALLOW)
DENIED = "User:mallory may not ALTER cluster kafka-cluster"


def creation(name: str = "orders", principal: str = "User:alice") -> AclCreation:
    return AclCreation(
        ResourceType.TOPIC,
        name,
        PatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        Permission.ALLOW,
    )


def test_creations_without_alter_on_the_cluster_are_each_refused() -> None:
    request = CreateAclsRequest((creation(), creation("bad/name")))
    refused = AclCreationResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, DENIED)
    assert plan_creations(request, may_alter=False, denied=DENIED) == [refused, refused]


def test_a_good_creation_is_a_pattern_change_and_a_bad_one_invalid() -> None:
    request = CreateAclsRequest((creation(), creation("bad/name"), creation(principal="alice")))
    good, bad_name, bad_principal = plan_creations(request, may_alter=True, denied=DENIED)
    assert isinstance(good, PatternChange) and good.pattern == TOPIC
    assert good.change(frozenset({BOB_READS})) == {ALICE_READS, BOB_READS}
    assert isinstance(bad_name, AclCreationResult)
    assert bad_name.error_code == ErrorCode.INVALID_REQUEST
    assert isinstance(bad_principal, AclCreationResult)
    assert bad_principal.error_code == ErrorCode.INVALID_REQUEST


def test_deletions_are_refused_or_invalid_or_planned_per_filter() -> None:
    alices = AclFilterSpec(principal="User:alice")
    unknown = AclFilterSpec(operation=99)
    request = DeleteAclsRequest((alices, unknown))
    refused = DeleteAclsFilterResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, DENIED)
    assert plan_deletions(request, may_alter=False, denied=DENIED) == [refused, refused]
    deletion, invalid = plan_deletions(request, may_alter=True, denied=DENIED)
    assert isinstance(invalid, DeleteAclsFilterResult)
    assert invalid.error_code == ErrorCode.INVALID_REQUEST
    assert isinstance(deletion, FilterDeletion)


def test_a_deletion_reports_what_its_last_written_attempt_removed() -> None:
    (deletion,) = plan_deletions(
        DeleteAclsRequest((AclFilterSpec(principal="User:alice"),)), may_alter=True, denied=""
    )
    assert isinstance(deletion, FilterDeletion)
    stored = frozenset({ALICE_READS, BOB_READS})
    change = deletion.change(TOPIC)
    assert change(frozenset({BOB_READS})) == {BOB_READS}  # an attempt that lost the race
    assert change(stored) == {BOB_READS}  # the attempt that was written
    deletion.written(TOPIC, (ErrorCode.NONE, None))
    result = deletion.result()
    assert result.error_code == ErrorCode.NONE
    assert [m.principal for m in result.matching_acls] == ["User:alice"]
