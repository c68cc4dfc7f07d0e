"""No request is served without the permission it needs (a run with `SimConfig.authorizer`).

After every step:
- every answer the authorizer core gave a broker (`Decision`) is the answer of `model_allows`,
  a small independent model of Kafka's AclAuthorizer over the ACLs that broker held then;
- every request a broker served (`Served`) needed a permission (this module's own table:
  Produce WRITE on each topic, a consumer's Fetch READ on each topic, a follower's Fetch
  CLUSTER_ACTION, CreateAcls and DeleteAcls ALTER on the cluster, and the group APIs' in
  `_check_group_request`) that the model grants for its principal: an answer without an
  authorization error, or an append, only with the grant; without it Kafka's error
  (TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED; the refused offsets undisclosed) and
  nothing changed: a refused produce's batch is in no log, a refused consumer fetch read no
  bytes, a refused ACL change left ZooKeeper's ACLs as they were, and no coordinator ever
  holds a refused OffsetCommit's offset as committed;
- ZooKeeper's ACLs change only in a step that served an allowed ACL change, and every broker
  holds ACLs that ZooKeeper held at some point (a lagging broker judges by an older state,
  never an invented one).
At the end (cluster.py's `not_converged`) every broker holds ZooKeeper's ACLs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from controller.zk_acls import read_all_acls
from protocol.acl import AclBinding, Acls
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.produce import ProducePartitionResponse, ProduceRequest
from protocol.records import read_header
from protocol.topic_partition import TopicPartition
from tests.simulation.acl_workload import Decision, Served
from tests.simulation.invariants import InvariantViolation
from tests.simulation.world import World

__all__ = ["AuthInvariants", "model_allows"]

_SUPER_USERS = frozenset({"User:admin", "User:broker"})
# The operations whose grant also grants DESCRIBE (and ALTER_CONFIGS: DESCRIBE_CONFIGS).
_GRANTS_DESCRIBE = frozenset({"READ", "WRITE", "DELETE", "ALTER", "DESCRIBE"})

BindingKey = frozenset[AclBinding]


def model_allows(
    bindings: Iterable[AclBinding], principal: str, host: str, operation: str, kind: str, name: str
) -> bool:
    """Kafka's AclAuthorizer, by its documented rules (a test oracle, not the core's code):
    super users may do anything; a resource no ACL applies to is refused
    (allow.everyone.if.no.acl.found=false); a DENY that applies wins; else an ALLOW of the
    operation, of ALL, or of one that implies it."""
    if principal in _SUPER_USERS:
        return True
    applying = []
    for b in bindings:
        p = b.pattern
        if p.resource_type.name != kind:
            continue
        if p.pattern_type.name == "LITERAL" and p.name not in (name, "*"):
            continue
        if p.pattern_type.name == "PREFIXED" and not name.startswith(p.name):
            continue
        applying.append(b.entry)
    if not applying:
        return False
    mine = [
        e
        for e in applying
        if e.principal in (principal, principal.split(":")[0] + ":*") and e.host in (host, "*")
    ]
    granting = {operation, "ALL"}
    if operation == "DESCRIBE":
        granting |= _GRANTS_DESCRIBE
    if operation == "DESCRIBE_CONFIGS":
        granting.add("ALTER_CONFIGS")
    if any(e.permission.name == "DENY" and e.operation.name in (operation, "ALL") for e in mine):
        return False
    return any(e.permission.name == "ALLOW" and e.operation.name in granting for e in mine)


class AuthInvariants:
    def __init__(self, world: World, admin_session: int) -> None:
        self.world = world
        self._admin_session = admin_session
        self._decisions: list[Decision] = []
        self._served: list[Served] = []
        world.on_authorized.append(self._decisions.append)
        world.on_served.append(self._served.append)
        self._zk_acls = self._read_zk()
        self._zk_history: set[BindingKey] = {_key(self._zk_acls)}
        self._broker_acls: dict[int, Acls] = {}
        # Offsets of refused OffsetCommits, by (group, partition): never committed.
        self._refused_commits: dict[tuple[str, TopicPartition], set[int]] = {}
        self.counts: Counter[str] = Counter()

    def _read_zk(self) -> Acls:
        acls, malformed = self.world.zk.run(self._admin_session, read_all_acls())
        if malformed:
            raise InvariantViolation(f"ACL znodes written malformed: {malformed}")
        return acls

    def zk_acls(self) -> Acls:
        return self._zk_acls

    def check(self) -> None:
        decisions, self._decisions[:] = list(self._decisions), []
        served, self._served[:] = list(self._served), []
        for decision in decisions:
            self._check_decision(decision)
        acl_changes: list[tuple[Served, bool]] = []
        for s in served:
            allowed = self._check_served(s)
            if isinstance(s.request, CreateAclsRequest | DeleteAclsRequest):
                acl_changes.append((s, allowed))
        before, now = self._zk_acls, self._read_zk()
        changed = _key(before) != _key(now)
        if changed:
            self._zk_history.add(_key(now))
            self.counts["ACL states in ZooKeeper"] += 1
            if not any(allowed for _, allowed in acl_changes):
                raise InvariantViolation(
                    f"ZooKeeper's ACLs changed without an allowed ACL change: {_show(before)} "
                    f"-> {_show(now)}"
                )
        for s, allowed in acl_changes:
            if not allowed and changed:
                raise InvariantViolation(
                    f"refused {type(s.request).__name__} of {s.principal} changed ZooKeeper's "
                    f"ACLs: {_show(before)} -> {_show(now)}"
                )
        self._zk_acls = now
        self._check_refused_commits()
        for broker_id, broker in sorted(self.world.brokers.items()):
            if not broker.alive or self._broker_acls.get(broker_id) is broker.acls:
                continue
            if _key(broker.acls) not in self._zk_history:
                raise InvariantViolation(
                    f"b{broker_id} holds ACLs ZooKeeper never held: {_show(broker.acls)}"
                )
            self._broker_acls[broker_id] = broker.acls
            self.counts["ACL states loaded by brokers"] += 1

    def _check_refused_commits(self) -> None:
        """No coordinator holds the offset of a refused OffsetCommit as committed."""
        if not self._refused_commits:
            return
        for broker_id, broker in sorted(self.world.brokers.items()):
            if broker.groups is None:
                continue
            committed = broker.groups.core.committed_offsets
            for (group, tp), offsets in self._refused_commits.items():
                value = committed.get(group, {}).get(tp)
                if value is not None and value.offset in offsets:
                    raise InvariantViolation(
                        f"b{broker_id}'s coordinator committed offset {value.offset} of {tp} for "
                        f"{group}, from an OffsetCommit that was refused"
                    )

    def _check_decision(self, d: Decision) -> None:
        expected = model_allows(
            d.acls.bindings(),
            str(d.principal),
            d.host,
            d.operation.name,
            d.resource_type.name,
            d.name,
        )
        if d.allowed != expected:
            raise InvariantViolation(
                f"b{d.broker_id}'s authorizer {'allowed' if d.allowed else 'denied'} "
                f"{d.principal}@{d.host} {d.operation.name} {d.resource_type.name}:{d.name}; "
                f"the model {'allows' if expected else 'denies'} it under {_show(d.acls)}"
            )
        self.counts[f"decisions: {'allowed' if d.allowed else 'denied'}"] += 1

    def _may(self, s: Served, operation: str, kind: str, name: str) -> bool:
        return model_allows(s.acls.bindings(), str(s.principal), s.host, operation, kind, name)

    def _check_served(self, s: Served) -> bool:
        """Check one served request; whether it had the permission it needs (all of it)."""
        request, response = s.request, s.response
        if isinstance(request, ProduceRequest):
            assert isinstance(response, dict)
            allowed = True
            for topic in request.topic_data:
                may = self._may(s, "WRITE", "TOPIC", topic.name)
                allowed = allowed and may
                for data in topic.partition_data:
                    tp = TopicPartition(topic.name, data.index)
                    result = response[tp]
                    assert isinstance(result, ProducePartitionResponse)
                    self._answer(s, "Produce", tp, may, result.error_code, "TOPIC")
                    if not may:
                        self._nowhere(s, tp, read_header(data.records).crc)
            return allowed
        if isinstance(request, FetchRequest):
            assert isinstance(response, FetchResponse)
            follower = request.replica_id >= 0
            what = "follower Fetch" if follower else "consumer Fetch"
            cluster_may = follower and self._may(s, "CLUSTER_ACTION", "CLUSTER", "kafka-cluster")
            allowed = True
            for answered in response.responses:
                name = answered.topic
                may = cluster_may if follower else self._may(s, "READ", "TOPIC", name)
                allowed = allowed and may
                for p in answered.partitions:
                    tp = TopicPartition(name, p.partition_index)
                    self._answer(s, what, tp, may, p.error_code, "TOPIC")
                    if not may and (p.records or p.high_watermark >= 0):
                        raise InvariantViolation(
                            f"b{s.broker_id} refused {what} of {tp} to {s.principal} but "
                            f"disclosed HW {p.high_watermark}, {len(p.records)} bytes"
                        )
            return allowed
        if isinstance(request, CreateAclsRequest | DeleteAclsRequest):
            may = self._may(s, "ALTER", "CLUSTER", "kafka-cluster")
            name = type(request).__name__.removesuffix("Request")
            if isinstance(response, CreateAclsResponse):
                codes = [r.error_code for r in response.results]
            else:
                assert isinstance(response, DeleteAclsResponse)
                codes = [r.error_code for r in response.filter_results]
            for code in codes:
                self._answer(s, name, "the cluster", may, code, "CLUSTER")
            return may
        return self._check_group_request(s)

    def _check_group_request(self, s: Served) -> bool:
        """The group APIs: FindCoordinator DESCRIBE on each group; ConsumerGroupHeartbeat
        READ on the group, DESCRIBE on each subscribed topic; OffsetCommit READ on the group
        and on each topic; OffsetFetch DESCRIBE on the group, and on each topic it shows."""
        request, response = s.request, s.response
        if isinstance(request, FindCoordinatorRequest):
            assert isinstance(response, FindCoordinatorResponse)
            allowed = True
            for c in response.coordinators:
                may = self._may(s, "DESCRIBE", "GROUP", c.key)
                allowed = allowed and may
                self._answer(s, "FindCoordinator", c.key, may, c.error_code, "GROUP")
            return allowed
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            assert isinstance(response, ConsumerGroupHeartbeatResponse)
            if not self._may(s, "READ", "GROUP", request.group_id):
                self._answer(s, "Heartbeat", request.group_id, False, response.error_code, "GROUP")
                return False
            self._answer(s, "Heartbeat", request.group_id, True, response.error_code, "GROUP")
            hidden = [
                t
                for t in request.subscribed_topic_names or ()
                if not self._may(s, "DESCRIBE", "TOPIC", t)
            ]
            self._answer(s, "Heartbeat", hidden, not hidden, response.error_code, "TOPIC")
            return not hidden
        if isinstance(request, OffsetCommitRequest):
            assert isinstance(response, OffsetCommitResponse)
            group_may = self._may(s, "READ", "GROUP", request.group_id)
            allowed = group_may
            for t in response.topics:
                may = group_may and self._may(s, "READ", "TOPIC", t.name)
                allowed = allowed and may
                for p in t.partitions:
                    kind = "TOPIC" if group_may else "GROUP"
                    self._answer(s, "OffsetCommit", t.name, may, p.error_code, kind)
            if not allowed:
                for topic in request.topics:
                    for sent in topic.partitions:
                        key = (request.group_id, TopicPartition(topic.name, sent.partition_index))
                        self._refused_commits.setdefault(key, set()).add(sent.committed_offset)
            return allowed
        if isinstance(request, OffsetFetchRequest):
            assert isinstance(response, OffsetFetchResponse)
            if not self._may(s, "DESCRIBE", "GROUP", request.group_id):
                self._answer(
                    s, "OffsetFetch", request.group_id, False, response.error_code, "GROUP"
                )
                if response.topics:
                    raise InvariantViolation(f"refused OffsetFetch disclosed {response.topics}")
                return False
            self._answer(s, "OffsetFetch", request.group_id, True, response.error_code, "GROUP")
            for shown in response.topics:
                may = self._may(s, "DESCRIBE", "TOPIC", shown.name)
                if not may and request.topics is None:
                    raise InvariantViolation(
                        f"b{s.broker_id} showed {s.principal} the offsets of {shown.name} in "
                        f"OffsetFetch of every topic; the model denies DESCRIBE on it"
                    )
                for fetched in shown.partitions:
                    self._answer(s, "OffsetFetch", shown.name, may, fetched.error_code, "TOPIC")
                    if not may and fetched.committed_offset != -1:
                        raise InvariantViolation(f"refused offsets disclosed: {shown}")
            return True
        raise InvariantViolation(f"unexpected served request {request!r}")

    def _answer(
        self, s: Served, what: str, resource: object, may: bool, code: int, kind: str
    ) -> None:
        """Without the grant Kafka's authorization error; with it, any other answer."""
        refusal = ErrorCode[f"{kind}_AUTHORIZATION_FAILED"]
        if may == (code == refusal):
            raise InvariantViolation(
                f"b{s.broker_id} answered {what} of {resource} from {s.principal}@{s.host} with "
                f"{ErrorCode(code).name}; the model {'allows' if may else 'denies'} it under "
                f"{_show(s.acls)}"
            )
        self.counts[f"{what}: {'served' if may else ErrorCode(code).name}"] += 1

    def _nowhere(self, s: Served, tp: TopicPartition, crc: int) -> None:
        """A refused produce's batch is in no replica's log."""
        for broker_id, broker in sorted(self.world.brokers.items()):
            log = broker.logs.get(tp)
            if log is not None and any(b.crc == crc for b in log.batches):
                raise InvariantViolation(
                    f"b{broker_id}'s log of {tp} holds a batch of {s.principal}'s produce that "
                    f"b{s.broker_id} refused"
                )


def _key(acls: Acls) -> BindingKey:
    return frozenset(acls.bindings())


def _show(acls: Acls) -> str:
    return "[" + "; ".join(_binding(b) for b in acls.bindings()) + "]"


def _binding(b: AclBinding) -> str:
    p, e = b.pattern, b.entry
    return (
        f"{p.resource_type.name}:{p.pattern_type.name}:{p.name} {e.principal}@{e.host} "
        f"{e.permission.name} {e.operation.name}"
    )
