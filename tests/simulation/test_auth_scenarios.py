"""The authorizer in the simulation, scripted: ACLs reach brokers by ZooKeeper's change
notifications, a watch's latency after they are written; until then a broker judges by the
ACLs it holds (as Kafka's AclAuthorizer), and afterwards a DENY wins. auth_invariants.py checks
every step of it."""

from __future__ import annotations

from pathlib import Path

from broker.core.principal import Principal
from protocol.acl import AclOperation, PatternType, Permission, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from protocol.topic_partition import TopicPartition
from tests.simulation.acl_workload import ADMIN, CLIENTS, Authenticated
from tests.simulation.cluster import SimCluster, quiet_logs
from tests.simulation.network import CLIENT_NODE
from tests.simulation.test_scenarios import TP, log_values, scripted

ALICE, MALLORY = CLIENTS[1], CLIENTS[3]
TOPIC_T = (ResourceType.TOPIC, "t", PatternType.LITERAL)
WATCH_LATENCY_MS = 40  # longer than a request and its answer take (at most 2 x 12 ms)


def creation(
    permission: Permission,
    principal: str,
    operation: AclOperation = AclOperation.WRITE,
    resource: tuple[ResourceType, str, PatternType] = (
        ResourceType.TOPIC,
        "t",
        PatternType.LITERAL,
    ),
) -> CreateAclsRequest:
    kind, name, pattern = resource
    return CreateAclsRequest(
        (AclCreation(kind, name, pattern, principal, "*", operation, permission),)
    )


def create_acls(
    cluster: SimCluster, broker_id: int, principal: Principal, request: CreateAclsRequest
) -> ErrorCode:
    answers: list[object] = []
    cluster.world.net.request(
        CLIENT_NODE,
        broker_id,
        Authenticated(principal, request),
        timeout_ms=5_000,
        on_response=answers.append,
        on_timeout=lambda: answers.append(None),
        label=f"SCRIPT: CreateAcls as {principal} -> b{broker_id}",
    )
    cluster.run_until(lambda: bool(answers), 5_000, "CreateAcls answered")
    response = answers[0]
    assert isinstance(response, CreateAclsResponse)
    return ErrorCode(response.results[0].error_code)


def produce_as(cluster: SimCluster, principal: Principal, value: bytes) -> str:
    """One batch to the leader as `principal`; its answer's error name."""
    outcomes = cluster.producer.outcomes
    before = sum(outcomes.values())
    before_counts = dict(outcomes)
    assert cluster.producer.produce(TP, [value], principal)
    cluster.run_until(lambda: sum(outcomes.values()) > before, 5_000, "the produce answered")
    (name,) = [k for k, n in outcomes.items() if n > before_counts.get(k, 0)]
    return name


def all_hold_zookeepers_acls(cluster: SimCluster) -> bool:
    assert cluster.auth_invariants is not None
    acls = cluster.auth_invariants.zk_acls()
    return all(b.acls == acls for b in cluster.world.brokers.values())


def test_a_deny_wins_once_read_and_a_stale_broker_judges_by_what_it_holds(tmp_path: Path) -> None:
    latency = (WATCH_LATENCY_MS, WATCH_LATENCY_MS)
    config = scripted(authorizer=True, zk_latency_ms=latency)
    with quiet_logs():
        cluster = SimCluster(0, tmp_path, config)
        try:
            run_the_story(cluster)
        finally:
            cluster.close()


def run_the_story(cluster: SimCluster) -> None:
    cluster.start()
    assert cluster.acl_workload is not None
    cluster.acl_workload.running = False  # the script changes the ACLs
    cluster.wait_settled()
    leader = cluster.leader_of(TopicPartition(*TP))
    other = next(b for b in cluster.world.brokers if b != leader)

    assert produce_as(cluster, ALICE, b"a0") == "TOPIC_AUTHORIZATION_FAILED"  # no ACL at all
    assert create_acls(cluster, other, ADMIN, creation(Permission.ALLOW, "User:alice")) == (
        ErrorCode.NONE
    )
    cluster.run_until(lambda: all_hold_zookeepers_acls(cluster), 1_000, "the ACL everywhere")
    assert produce_as(cluster, ALICE, b"a1") == "NONE"

    # A DENY for everyone on t*, written through another broker: the leader reads it a watch's
    # latency later, and a produce that reaches it first is judged by the ACLs it holds.
    deny = creation(
        Permission.DENY, "User:*", resource=(ResourceType.TOPIC, "t", PatternType.PREFIXED)
    )
    assert create_acls(cluster, other, ADMIN, deny) == ErrorCode.NONE
    assert not all_hold_zookeepers_acls(cluster)
    assert produce_as(cluster, ALICE, b"a2") == "NONE"

    cluster.run_until(lambda: all_hold_zookeepers_acls(cluster), 1_000, "the DENY everywhere")
    assert produce_as(cluster, ALICE, b"a3") == "TOPIC_AUTHORIZATION_FAILED"
    assert produce_as(cluster, ADMIN, b"a4") == "NONE"  # a super user
    cluster.wait_settled()
    for broker_id in cluster.world.brokers:
        assert log_values(cluster, broker_id) == [b"a1", b"a2", b"a4"]

    # Changing ACLs needs ALTER on the cluster: mallory's grant to herself is refused, and
    # ZooKeeper's ACLs stay as they were.
    assert cluster.auth_invariants is not None
    before = cluster.auth_invariants.zk_acls()
    own = creation(
        Permission.ALLOW,
        "User:mallory",
        AclOperation.ALL,
        (ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
    )
    assert create_acls(cluster, leader, MALLORY, own) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert cluster.auth_invariants.zk_acls() == before
    cluster.check_final()
