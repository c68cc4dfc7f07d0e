"""Clients with principals, for a run with an authorizer (`SimConfig.authorizer`).

Four client principals: User:admin (a super user, as is User:broker, the brokers' own) and
User:alice, User:bob, User:mallory, who may do only what the ACLs allow
(allow.everyone.if.no.acl.found=false). Requests travel as `Authenticated(principal,
request)`, the principal a real connection is bound to after SASL. Besides the producer (whose
batches go out as a random principal), `AclWorkload` sends CreateAcls and DeleteAcls (mostly
as the admin, sometimes as a principal that may be refused) to a random live broker,
consumer fetches to partition leaders and, in a run with a consumer group (whose members
connect as the admin), FindCoordinator and OffsetFetch for that group and OffsetCommits for
a group without members. Brokers apply ACL
changes through ZooKeeper and learn them from its change notifications, a watch's latency
later (broker.py).

`Decision` (what the authorizer core answered a broker) and `Served` (a request and what it
got, with the ACLs the broker held) are what auth_invariants.py checks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from broker.core.authorizer import AuthorizerSettings
from broker.core.principal import Principal, parse_principal
from controller.zk_acls import read_all_acls
from protocol.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    Acls,
    PatternType,
    Permission,
    ResourceType,
)
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import AclFilterSpec
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicRequest,
)
from protocol.topic_partition import INTERNAL_TOPICS, OFFSETS_TOPIC, TopicPartition
from tests.simulation.network import CLIENT_NODE
from tests.simulation.world import World

__all__ = [
    "ADMIN",
    "BROKER",
    "CLIENTS",
    "CLIENT_HOST",
    "SETTINGS",
    "AclWorkload",
    "Authenticated",
    "Decision",
    "Served",
]

ADMIN: Final = parse_principal("User:admin")
BROKER: Final = parse_principal("User:broker")  # the inter-broker principal
CLIENTS: Final = (
    ADMIN,
    parse_principal("User:alice"),
    parse_principal("User:bob"),
    parse_principal("User:mallory"),
)
CLIENT_HOST: Final = "10.0.0.7"  # every client connects from here
SETTINGS: Final = AuthorizerSettings(super_users=frozenset({ADMIN, BROKER}))

# What ACLs are made of: patterns that do and do not apply to topic "t" and the cluster.
_PATTERNS: Final = (
    (ResourceType.TOPIC, "t", PatternType.LITERAL),
    (ResourceType.TOPIC, WILDCARD, PatternType.LITERAL),
    (ResourceType.TOPIC, "t", PatternType.PREFIXED),
    (ResourceType.TOPIC, "x", PatternType.PREFIXED),
    (ResourceType.TOPIC, "c", PatternType.LITERAL),
    (ResourceType.GROUP, "g", PatternType.LITERAL),
    (ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL),
)
_ENTRY_PRINCIPALS: Final = ("User:alice", "User:bob", "User:mallory", "User:*")
_HOSTS: Final = (WILDCARD, WILDCARD, CLIENT_HOST, "10.9.9.9")
# Operations by resource type: mostly those the requests need, so that an ALLOW and a DENY
# often meet on one principal and resource (deny must win), with some that only imply them
# or do not apply.
_OPERATIONS: Final = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.ALL,
        AclOperation.DESCRIBE,
        AclOperation.ALTER,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.ALL),
    ResourceType.CLUSTER: (
        AclOperation.ALTER,
        AclOperation.ALL,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
    ),
}
_DENY_PROBABILITY: Final = 0.35


@dataclass(frozen=True, slots=True)
class Authenticated:
    """A client's request on a connection authenticated as `principal`."""

    principal: Principal
    request: object


@dataclass(frozen=True, slots=True)
class Decision:
    """The authorizer core's answer to a broker, with the ACLs it judged by."""

    broker_id: int
    acls: Acls
    principal: Principal
    host: str
    operation: AclOperation
    resource_type: ResourceType
    name: str
    allowed: bool


@dataclass(frozen=True, slots=True)
class Served:
    """A request a broker answered (or, for Produce, appended), as whom, with what result,
    under which ACLs. `response`: the response message, or for Produce the per-partition
    results `append_produce` returned ({TopicPartition: ProducePartitionResponse})."""

    broker_id: int
    acls: Acls
    principal: Principal
    host: str
    request: object
    response: object


class AclWorkload:
    def __init__(self, world: World, admin_session: int, group: str | None = None) -> None:
        """`group`: the consumer group of the run (groups.py), whose coordinator and offsets
        the principals also ask for (FindCoordinator, OffsetFetch: they change nothing);
        they commit offsets for `outside_group`, which has no members."""
        self.world = world
        self.admin_session = admin_session
        self.group = group
        self.outside_group = f"{group}-outside"  # no members: anyone allowed may commit
        self._next_offset = 1_000_000  # each outside commit's offset is new
        self.patterns: tuple[tuple[ResourceType, str, PatternType], ...] = _PATTERNS
        if group is not None:
            self.patterns += (
                (ResourceType.GROUP, group, PatternType.LITERAL),
                (ResourceType.GROUP, group[:3], PatternType.PREFIXED),
                (ResourceType.GROUP, self.outside_group, PatternType.LITERAL),
            )
        self.running = False
        self.counts: Counter[str] = Counter()

    def start(self) -> None:
        self.running = True
        self._schedule_change()
        self._schedule_fetch()

    def principal(self) -> Principal:
        """A client principal: the admin a quarter of the time."""
        return self.world.rng.choice(CLIENTS)

    # -- ACL changes -----------------------------------------------------------------------

    def _schedule_change(self) -> None:
        if self.running:
            delay_ms = self.world.draw(self.world.config.acl_change_interval_ms)
            self.world.scheduler.after(delay_ms, "ACL change", self._change)

    def _change(self) -> None:
        if not self.running:
            return
        rng = self.world.rng
        # Mostly the admin; else someone who needs ALTER on the cluster to be obeyed.
        principal = ADMIN if rng.random() < 0.6 else self.principal()
        request: CreateAclsRequest | DeleteAclsRequest
        if rng.random() < 0.65:
            request = CreateAclsRequest((self._creation(),))
        else:
            request = DeleteAclsRequest((self._deletion(),))
        self._send(principal, request, f"{type(request).__name__} as {principal}")
        self._schedule_change()

    def _creation(self) -> AclCreation:
        rng = self.world.rng
        resource_type, name, pattern_type = rng.choice(self.patterns)
        permission = Permission.DENY if rng.random() < _DENY_PROBABILITY else Permission.ALLOW
        return AclCreation(
            resource_type,
            name,
            pattern_type,
            rng.choice(_ENTRY_PRINCIPALS),
            rng.choice(_HOSTS),
            rng.choice(_OPERATIONS[resource_type]),
            permission,
        )

    def _deletion(self) -> AclFilterSpec:
        """One stored ACL exactly (as ZooKeeper holds them now), or every ACL of a principal."""
        rng = self.world.rng
        acls, _ = self.world.zk.run(self.admin_session, read_all_acls())
        bindings = list(acls.bindings())
        if bindings and rng.random() < 0.8:
            b = rng.choice(bindings)
            p, e = b.pattern, b.entry
            return AclFilterSpec(
                p.resource_type,
                p.name,
                p.pattern_type,
                e.principal,
                e.host,
                e.operation,
                e.permission,
            )
        return AclFilterSpec(
            ResourceType.ANY,
            None,
            PatternType.ANY,
            rng.choice(_ENTRY_PRINCIPALS),
            None,
            AclOperation.ANY,
            Permission.ANY,
        )

    # -- consumers -------------------------------------------------------------------------

    def _schedule_fetch(self) -> None:
        if self.running:
            delay_ms = self.world.draw(self.world.config.consumer_fetch_interval_ms)
            self.world.scheduler.after(delay_ms, "consumer fetches", self._fetch)

    def _fetch(self) -> None:
        if not self.running:
            return
        if self.group is not None and self.world.rng.random() < 0.3:
            self._ask_about_group(self.group)
            self._schedule_fetch()
            return
        tps = sorted(tp for tp in self.world.zk.states if tp.topic not in INTERNAL_TOPICS)
        if tps:
            tp = self.world.rng.choice(tps)
            found = self.world.zk.state(tp)
            leader = found[0].leader if found is not None else -1
            principal = self.principal()
            if leader >= 0:
                request = FetchRequest(
                    -1,
                    0,
                    0,
                    1 << 20,
                    (FetchTopic(tp.topic, (FetchPartition(tp.partition, 0, 1 << 20),)),),
                )
                self._send(principal, request, f"consumer Fetch {tp} as {principal}", leader)
        self._schedule_fetch()

    def _ask_about_group(self, group: str) -> None:
        rng = self.world.rng
        principal = self.principal()
        request: FindCoordinatorRequest | OffsetFetchRequest | OffsetCommitRequest
        if rng.random() < 0.5:
            self._commit_outside(principal)
            return
        if rng.random() < 0.4:
            request = FindCoordinatorRequest((group,))
        elif rng.random() < 0.5:
            request = OffsetFetchRequest(group)  # every topic's offsets
        else:
            request = OffsetFetchRequest(group, (OffsetFetchTopicRequest("t", (0, 1)),))
        self._send(principal, request, f"{type(request).__name__} as {principal}")

    def _commit_outside(self, principal: Principal) -> None:
        """An OffsetCommit for the group nobody is a member of, to its coordinator (as
        ZooKeeper names the leader of its offsets partition)."""
        cores = [b.groups.core for b in self.world.brokers.values() if b.groups is not None]
        if not cores:
            return
        partition = cores[0].partition_of(self.outside_group)
        found = self.world.zk.state(TopicPartition(OFFSETS_TOPIC, partition))
        if found is None or found[0].leader < 0:
            return
        self._next_offset += 1
        committed = OffsetCommitPartition(self.world.rng.randrange(4), self._next_offset)
        request = OffsetCommitRequest(self.outside_group, (OffsetCommitTopic("t", (committed,)),))
        label = f"OffsetCommit {self.outside_group} as {principal}"
        self._send(principal, request, label, found[0].leader)

    # -- sending ---------------------------------------------------------------------------

    def _send(self, principal: Principal, request: object, label: str, to: int = -1) -> None:
        world = self.world
        if to < 0:
            alive = sorted(i for i, b in world.brokers.items() if b.alive)
            if not alive:
                self.counts["no broker to ask"] += 1
                return
            to = world.rng.choice(alive)

        def answered(response: object) -> None:
            self.counts[f"{type(request).__name__}: {_outcome(response)}"] += 1

        def timed_out() -> None:
            self.counts[f"{type(request).__name__}: no answer"] += 1

        world.net.request(
            CLIENT_NODE,
            to,
            Authenticated(principal, request),
            timeout_ms=world.config.request_timeout_ms,
            on_response=answered,
            on_timeout=timed_out,
            label=f"{label} -> b{to}",
        )


def _outcome(response: object) -> str:
    match response:
        case CreateAclsResponse(results=results):
            codes = [r.error_code for r in results]
        case DeleteAclsResponse(filter_results=results):
            codes = [r.error_code for r in results]
        case FetchResponse(responses=responses) if response.error_code == ErrorCode.NONE:
            codes = [p.error_code for t in responses for p in t.partitions]
        case FetchResponse():
            codes = [response.error_code]
        case FindCoordinatorResponse(coordinators=coordinators):
            codes = [c.error_code for c in coordinators]
        case OffsetFetchResponse(topics=topics) if response.error_code == ErrorCode.NONE:
            codes = sorted({p.error_code for t in topics for p in t.partitions})
        case OffsetFetchResponse():
            codes = [response.error_code]
        case OffsetCommitResponse(topics=topics):
            codes = sorted({p.error_code for t in topics for p in t.partitions})
        case _:
            codes = []
    return ",".join(ErrorCode(c).name for c in codes)
