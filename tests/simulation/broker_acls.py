"""A simulated broker's authorizer hooks and ACL admin: broker/context.py's authorize over the
ACLs last read from ZooKeeper (broker/acl_changes.py), each answer told to the invariants, and
CreateAcls/DeleteAcls as broker/handlers/acls.py carries out broker/core/acl_admin.py's plan
(the ZooKeeper writes are synchronous here)."""

from __future__ import annotations

from collections.abc import Callable

from broker.core.acl_admin import (
    ACL_CHANGE_ATTEMPTS,
    KEPT_CHANGING,
    Entries,
    FilterDeletion,
    Outcome,
    PatternChange,
    plan_creations,
    plan_deletions,
)
from broker.core.authorizer import authorize
from broker.core.principal import Principal
from broker.core.request_acls import (
    Allowed,
    denied_message,
    may_change_acls,
)
from controller.zk_acls import (
    AclsChangedError,
    change_acls,
    read_all_acls,
    watch_acl_changes,
)
from protocol.acl import AclOperation, Acls, ResourcePattern, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from tests.simulation.acl_workload import (
    SETTINGS,
    Decision,
    Served,
)
from tests.simulation.broker_base import SimBrokerBase
from tests.simulation.network import Envelope

__all__ = ["SimBrokerAcls"]


class SimBrokerAcls(SimBrokerBase):
    """The authorizer's answers, told to the invariants; the ACLs' admin requests."""

    def _allowed(self, principal: Principal, host: str) -> Allowed | None:
        """The authorizer core over this broker's ACLs, as `principal` from `host`, each
        answer told to the invariants; None without an authorizer."""
        if not self.world.config.authorizer:
            return None
        acls, hooks = self.acls, self.world.on_authorized

        def allowed(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
            answer = authorize(acls, SETTINGS, principal, host, operation, resource_type, name)
            decision = Decision(
                self.broker_id, acls, principal, host, operation, resource_type, name, answer
            )
            for hook in hooks:
                hook(decision)
            return answer

        return allowed

    def _served(
        self, acls: Acls, principal: Principal, host: str, request: object, response: object
    ) -> None:
        """Tell the invariants what was answered, under the ACLs it was judged by."""
        if self.world.config.authorizer:
            served = Served(self.broker_id, acls, principal, host, request, response)
            for hook in self.world.on_served:
                hook(served)

    def _reload_acls(self) -> None:
        """broker/acl_changes.py's reload: re-arm the watches, then read every ACL."""
        self._zk_run(watch_acl_changes())
        found = self._zk_run(read_all_acls())
        if found is not None and found[0] != self.acls:
            self.acls = found[0]
            self.world.trace(
                f"b{self.broker_id} loaded ACLs ({len(self.acls.by_pattern)} patterns)"
            )

    def _acl_request(
        self,
        envelope: Envelope,
        request: CreateAclsRequest | DeleteAclsRequest,
        principal: Principal,
        host: str,
    ) -> None:
        """CreateAcls and DeleteAcls, as broker/handlers/acls.py carries out the core's plan
        (its ZooKeeper writes are synchronous here)."""
        allowed = self._allowed(principal, host)
        acls = self.acls  # as judged on arrival: the answer reports these
        may_alter = allowed is not None and may_change_acls(allowed)
        denied = denied_message(principal, AclOperation.ALTER, ResourceType.CLUSTER)
        response: CreateAclsResponse | DeleteAclsResponse
        if isinstance(request, CreateAclsRequest):
            planned = plan_creations(request, may_alter=may_alter, denied=denied)
            response = CreateAclsResponse(tuple(self._create(p) for p in planned))
        else:
            plan = plan_deletions(request, may_alter=may_alter, denied=denied)
            response = DeleteAclsResponse(tuple(self._delete(p) for p in plan))
        self._served(acls, principal, host, request, response)
        self._respond(envelope, response)

    def _create(self, planned: AclCreationResult | PatternChange) -> AclCreationResult:
        if isinstance(planned, AclCreationResult):
            return planned
        return AclCreationResult(*self._change_acls(planned.pattern, planned.change))

    def _delete(self, planned: DeleteAclsFilterResult | FilterDeletion) -> DeleteAclsFilterResult:
        if isinstance(planned, DeleteAclsFilterResult):
            return planned
        found = self._zk_run(read_all_acls())
        if found is None:
            return DeleteAclsFilterResult(ErrorCode.UNKNOWN_SERVER_ERROR, "ZooKeeper")
        for pattern in planned.patterns(found[0].bindings()):
            planned.written(pattern, self._change_acls(pattern, planned.change(pattern)))
        return planned.result()

    def _change_acls(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Outcome:
        for _ in range(ACL_CHANGE_ATTEMPTS):
            try:
                done = self._zk_run(change_acls(pattern, change))
            except AclsChangedError:
                continue
            if done is None:
                return ErrorCode.UNKNOWN_SERVER_ERROR, "ZooKeeper: session gone"
            return ErrorCode.NONE, None
        return KEPT_CHANGING
