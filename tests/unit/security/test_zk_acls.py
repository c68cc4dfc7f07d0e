"""ACLs in ZooKeeper (Kafka's layout) over the simulator's ZooKeeper, and the principal of a
client certificate."""

from __future__ import annotations

import json

import pytest

from broker.tls import certificate_subject
from controller.zk_acls import AclsChangedError, change_acls, read_all_acls, watch_acl_changes
from controller.zk_script import get_data, set_data
from protocol.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from tests.simulation.zk import SimZk

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, Permission.ALLOW)
DENY = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.ALL, Permission.DENY)


def test_acls_are_stored_as_kafka_stores_them_and_read_back() -> None:
    zk = SimZk()
    session = zk.open_session(1)
    literal = ResourcePattern(ResourceType.TOPIC, "orders")
    prefixed = ResourcePattern(ResourceType.GROUP, "team-", PatternType.PREFIXED)
    zk.run(session, change_acls(literal, lambda old: old | {READ}))
    zk.run(session, change_acls(prefixed, lambda old: old | {DENY}))
    data, _ = zk.run(session, get_data("/kafka-acl/Topic/orders"))  # type: ignore[misc]
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    assert zk.run(session, get_data("/kafka-acl-extended/prefixed/Group/team-")) is not None
    changes = zk.run(session, watch_acl_changes())
    assert len(changes) == 2
    acls, malformed = zk.run(session, read_all_acls())
    assert not malformed
    assert acls.by_pattern == {literal: frozenset({READ}), prefixed: frozenset({DENY})}
    zk.run(session, change_acls(literal, lambda old: old - {READ}))  # empty: the znode goes
    assert zk.run(session, get_data("/kafka-acl/Topic/orders")) is None


def test_a_concurrent_writer_is_detected_and_a_malformed_znode_skipped() -> None:
    zk = SimZk()
    session = zk.open_session(1)
    pattern = ResourcePattern(ResourceType.TOPIC, "orders")
    zk.run(session, change_acls(pattern, lambda old: old | {READ}))

    def racing(old: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
        zk.run(session, set_data("/kafka-acl/Topic/orders", b'{"version":1,"acls":[]}'))
        return old | {DENY}

    with pytest.raises(AclsChangedError):
        zk.run(session, change_acls(pattern, racing))
    zk.run(session, set_data("/kafka-acl/Topic/orders", b"not json"))
    acls, malformed = zk.run(session, read_all_acls())
    assert malformed == ["/kafka-acl/Topic/orders"] and not acls.by_pattern


def test_certificate_subjects_read_as_rfc_2253() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc."),),
        (("commonName", "alice"),),
    )
    assert certificate_subject({"subject": subject}) == "CN=alice,O=Example\\, Inc.,C=US"
    assert certificate_subject(None) is None
