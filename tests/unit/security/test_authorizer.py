"""The authorizer core: Kafka's AclAuthorizer rules, by example and by property."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.core.authorizer import AuthorizerSettings, authorize, authorize_any
from broker.core.principal import Principal, parse_principal
from protocol.acl import (
    AccessControlEntry,
    AclBinding,
    AclFilter,
    AclOperation,
    Acls,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")
NO_SUPERS = AuthorizerSettings()
R, W, D = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC = ResourceType.TOPIC


def acl(
    name: str,
    operation: AclOperation,
    permission: Permission = Permission.ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


def allowed(
    acls: list[AclBinding],
    operation: AclOperation,
    name: str = "orders",
    principal: Principal = ALICE,
    host: str = "10.0.0.1",
    settings: AuthorizerSettings = NO_SUPERS,
) -> bool:
    return authorize(Acls.of(acls), settings, principal, host, operation, TOPIC, name)


def test_an_allow_allows_that_operation_only() -> None:
    acls = [acl("orders", W)]
    assert allowed(acls, W)
    assert not allowed(acls, R)
    assert not allowed(acls, W, principal=BOB)
    assert not allowed(acls, W, name="payments")


def test_read_write_delete_alter_imply_describe_and_alter_configs_implies_describe_configs() -> (
    None
):
    for operation in (R, W, AclOperation.DELETE, AclOperation.ALTER):
        assert allowed([acl("orders", operation)], D)
    assert allowed([acl("orders", AclOperation.ALTER_CONFIGS)], AclOperation.DESCRIBE_CONFIGS)
    assert not allowed([acl("orders", D)], R)
    assert not allowed([acl("orders", AclOperation.CREATE)], D)


def test_all_matches_every_operation_and_deny_wins() -> None:
    assert allowed([acl("orders", AclOperation.ALL)], AclOperation.IDEMPOTENT_WRITE)
    denied = [acl("orders", AclOperation.ALL), acl("orders", W, Permission.DENY)]
    assert not allowed(denied, W)
    assert allowed(denied, R)
    # A DENY of READ does not deny DESCRIBE, which READ would imply (Kafka's rule).
    assert allowed([acl("orders", D), acl("orders", R, Permission.DENY)], D)


def test_wildcards_prefixes_and_hosts() -> None:
    assert allowed([acl("*", R)], R, name="anything")
    assert allowed([acl("ord", R, pattern=PatternType.PREFIXED)], R, name="orders")
    assert not allowed([acl("pay", R, pattern=PatternType.PREFIXED)], R, name="orders")
    assert allowed([acl("orders", R, principal="User:*")], R, principal=BOB)
    assert allowed([acl("orders", R, host="10.0.0.1")], R)
    assert not allowed([acl("orders", R, host="10.0.0.2")], R)
    assert not allowed(
        [acl("orders", R), acl("o", R, Permission.DENY, pattern=PatternType.PREFIXED)], R
    )


def test_super_users_and_resources_without_acls() -> None:
    supers = AuthorizerSettings(frozenset({ALICE}))
    assert allowed([acl("orders", W, Permission.DENY)], W, settings=supers)
    assert not allowed([], R)
    everyone = AuthorizerSettings(allow_everyone_if_no_acl_found=True)
    assert allowed([], R, settings=everyone)
    # Any ACL on the resource, even another principal's, means the ACLs decide.
    assert not allowed([acl("orders", R, principal="User:bob")], R, settings=everyone)


def test_some_topic_for_kip_679() -> None:
    acls = Acls.of([acl("orders", W)])
    assert authorize_any(acls, NO_SUPERS, ALICE, "h", W, TOPIC)
    assert not authorize_any(acls, NO_SUPERS, BOB, "h", W, TOPIC)
    denied_everywhere = Acls.of([acl("orders", W), acl("*", W, Permission.DENY)])
    assert not authorize_any(denied_everywhere, NO_SUPERS, ALICE, "h", W, TOPIC)


def test_filters_match_as_kafkas() -> None:
    literal, prefixed = acl("orders", R), acl("ord", W, pattern=PatternType.PREFIXED)
    assert AclFilter().matches(literal) and AclFilter().matches(prefixed)
    match = AclFilter(TOPIC, "orders", PatternType.MATCH)
    assert match.matches(literal) and match.matches(prefixed)
    assert not AclFilter(TOPIC, "orders", PatternType.PREFIXED).matches(literal)
    assert AclFilter(operation=W).matches(prefixed) and not AclFilter(operation=W).matches(literal)
    assert not AclFilter(principal="User:bob").matches(literal)


def test_principals_parse() -> None:
    assert parse_principal("User:CN=alice,O=x") == Principal("User", "CN=alice,O=x")
    assert str(ALICE) == "User:alice"


NAMES = st.sampled_from(["orders", "ord", "payments", "*", "o"])
OPERATIONS = st.sampled_from(
    [o for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)]
)
BINDINGS = st.builds(
    acl,
    NAMES,
    OPERATIONS,
    st.sampled_from([Permission.ALLOW, Permission.DENY]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]),
    st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
)
ASKED = st.sampled_from([R, W, D, AclOperation.CREATE, AclOperation.ALTER_CONFIGS])


@given(st.lists(BINDINGS, max_size=8), ASKED, st.sampled_from(["orders", "payments"]))
def test_adding_a_deny_never_allows_more(
    acls: list[AclBinding], operation: AclOperation, name: str
) -> None:
    before = allowed(acls, operation, name)
    after = allowed([*acls, acl("*", AclOperation.ALL, Permission.DENY, "User:*")], operation, name)
    assert not after or before
    assert not after


@given(st.lists(BINDINGS, max_size=8), BINDINGS, ASKED, st.sampled_from(["orders", "payments"]))
def test_adding_an_allow_never_allows_less(
    acls: list[AclBinding], extra: AclBinding, operation: AclOperation, name: str
) -> None:
    if extra.entry.permission is Permission.DENY:
        return
    assert allowed([*acls, extra], operation, name) >= allowed(acls, operation, name)


@given(st.lists(BINDINGS, max_size=8), ASKED)
def test_a_decision_depends_on_the_acls_not_their_order(
    acls: list[AclBinding], operation: AclOperation
) -> None:
    assert allowed(acls, operation) == allowed(list(reversed(acls)), operation)
