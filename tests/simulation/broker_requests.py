"""A simulated broker's requests, as broker/handlers deliver them to the same cores: Fetch and
Produce (parked in the purgatory, broker.core.delayed), the controller's requests (held until
registered, fenced by epochs, then applied), the group APIs and OffsetForLeaderEpoch, each
authorized first (broker.core.request_acls) as the handlers do."""

from __future__ import annotations

import functools

from broker.core.actions import Actions
from broker.core.controller_requests import (
    ControllerRequestOutcome,
    apply_leader_and_isr,
    apply_stop_replica,
    apply_update_metadata,
)
from broker.core.delayed import DelayedFetch, DelayedProduce
from broker.core.fetch import max_wait_ms
from broker.core.fetch_session import FetchContext, answer_fetch, open_fetch
from broker.core.group.find_coordinator import (
    answer_find_coordinator,
    find_coordinator_refusals,
)
from broker.core.offset_for_leader_epoch import answer_offset_for_leader_epoch
from broker.core.principal import Principal
from broker.core.produce import (
    append_produce,
    timeout_ms,
)
from broker.core.request_acls import (
    authorized_offset_fetch,
    denied_message,
    fetch_denied,
    find_coordinator_denied,
    heartbeat_refusal,
    may_follow,
    offset_commit_denied,
    produce_denied,
    split_offset_commit,
)
from controller.zk_topics import get_topic_config
from controller.zk_types import ZkError
from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
)
from protocol.messages.create_acls import (
    CreateAclsRequest,
)
from protocol.messages.delete_acls import (
    DeleteAclsRequest,
)
from protocol.messages.fetch import INITIAL_EPOCH, FetchRequest, FetchResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.records import decode_batches, read_header
from tests.simulation.acl_workload import (
    BROKER,
    CLIENT_HOST,
    Authenticated,
)
from tests.simulation.broker_upkeep import SimBrokerUpkeep
from tests.simulation.classic_shell import CLASSIC_REQUESTS, serve_classic
from tests.simulation.controller_shell import ControllerAsk, SimController
from tests.simulation.network import Envelope
from tests.simulation.world import Ack

__all__ = ["SimBrokerRequests"]

GROUP_REQUESTS = (
    FindCoordinatorRequest,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    *CLASSIC_REQUESTS,
)

ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
_REFUSALS: dict[type, type] = {
    LeaderAndIsrRequest: LeaderAndIsrResponse,
    UpdateMetadataRequest: UpdateMetadataResponse,
    StopReplicaRequest: StopReplicaResponse,
}


class SimBrokerRequests(SimBrokerUpkeep):
    """Each request delivered to the core its handler calls, authorized first."""

    def handle_request(self, envelope: Envelope) -> None:
        assert self.state is not None
        payload = envelope.payload
        # Who the connection is: a client's principal, or the brokers' own.
        principal, host = BROKER, f"10.0.1.{envelope.src}"
        if isinstance(payload, Authenticated):
            principal, host, payload = payload.principal, CLIENT_HOST, payload.request
        if isinstance(payload, FetchRequest):
            self._fetch(envelope, payload, principal, host)
        elif isinstance(payload, ProduceRequest):
            self._produce(envelope, payload, principal, host)
        elif isinstance(payload, CreateAclsRequest | DeleteAclsRequest):
            self._acl_request(envelope, payload, principal, host)
        elif isinstance(payload, OffsetForLeaderEpochRequest):
            self._respond(envelope, answer_offset_for_leader_epoch(self.state, payload))
        elif isinstance(payload, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest):
            self._controller_request(
                envelope, payload, self.now_ms + self.world.config.request_timeout_ms
            )
        elif isinstance(payload, GROUP_REQUESTS):
            self._group_request(envelope, payload, principal, host)
        elif isinstance(payload, ControllerAsk):
            if self.controller is not None and self.controller.active:
                self.controller.ask(payload.event, functools.partial(self._respond, envelope))
            else:
                self._respond(envelope, SimController.refuse(self.broker_id, payload.event))
        else:
            raise TypeError(f"unexpected request {payload!r}")

    # -- the controller's requests (broker/handlers/leader_and_isr.py and the others) -----

    def _controller_request(
        self, envelope: Envelope, request: ControllerRequest, deadline_ms: int
    ) -> None:
        """The handlers' admission, then the core. Before registration the request is held
        (bounded), as the real broker holds it."""
        assert self.state is not None
        state = self.state
        if state.broker_epoch < 0 and self.now_ms < deadline_ms:
            retry = functools.partial(self._controller_request, envelope, request, deadline_ms)
            self.after(self.world.config.broker_registration_retry_ms, "held request", retry)
            return
        refused = state.admit_controller_request(request.controller_epoch, request.broker_epoch)
        if refused != ErrorCode.NONE:
            return self._respond(envelope, _REFUSALS[type(request)](refused))
        outcome: ControllerRequestOutcome[object]
        if isinstance(request, LeaderAndIsrRequest):
            try:
                topics = {s.topic_name for s in request.partition_states}
                configs = {t: self._zk_run(get_topic_config(t), raising=True) for t in topics}
            except ZkError:
                return  # the handler fails: no answer; the controller's channel retries
            outcome = apply_leader_and_isr(  # type: ignore[assignment]
                state, request, configs, self.now_ms, wall_ms=self.wall_ms
            )
        elif isinstance(request, UpdateMetadataRequest):
            outcome = apply_update_metadata(state, request)  # type: ignore[assignment]
        else:
            outcome = apply_stop_replica(state, request)  # type: ignore[assignment]
        self.world.trace(f"b{self.broker_id} applied {type(request).__name__}")
        self.apply(outcome.actions)
        self._respond(envelope, outcome.response)

    # -- the group coordinator (broker/handlers for the group APIs) ------------------------

    def _group_request(
        self, envelope: Envelope, request: object, principal: Principal, host: str
    ) -> None:
        """The group handlers: authorized first (broker.core.request_acls), as they are."""
        assert self.state is not None
        groups = self.groups
        allowed = self._allowed(principal, host)
        acls = self.acls  # as judged on arrival: the answer reports these

        def respond(response: object) -> None:
            self._served(acls, principal, host, request, response)
            self._respond(envelope, response)

        if groups is None:
            raise TypeError(f"no consumer groups in this run: {request!r}")
        core = groups.core
        if isinstance(request, FindCoordinatorRequest):
            # The offsets topic is created with the cluster here (cluster.py): none to ask for.
            refused = find_coordinator_refusals(
                request,
                find_coordinator_denied(request, allowed) if allowed else frozenset(),
                lambda key: denied_message(
                    principal, AclOperation.DESCRIBE, ResourceType.GROUP, key
                ),
            )
            respond(answer_find_coordinator(request, refused, self.state.metadata, None))
        elif isinstance(request, ConsumerGroupHeartbeatRequest):
            refusal = heartbeat_refusal(request, allowed, principal) if allowed else None
            if refusal is not None:
                return respond(refusal)
            # The principal goes on record only with an authorizer (the handler always
            # records it): runs without one keep the group records their seeds always made.
            decision = core.heartbeat(
                request,
                groups.topics(),
                self.now_ms,
                "sim",
                wall_ms=self.wall_ms,
                principal=str(principal) if allowed else "",
            )
            groups.write(decision, respond)
        elif isinstance(request, OffsetCommitRequest):

            def committed(ack: Ack) -> None:
                for hook in self.world.on_group_commit:
                    hook(request, ack)

            not_read = offset_commit_denied(request, allowed) if allowed else frozenset()
            split = split_offset_commit(request, not_read)
            if split.request is None:
                return respond(split.refused)
            decision_ = core.commit(split.request, groups.topics(), self.wall_ms)
            groups.write(decision_, lambda r: respond(split.merged(r)), committed)
        elif isinstance(request, CLASSIC_REQUESTS):
            # The members connect as a super user (groups.py): no ACL decision to make.
            serve_classic(groups, request, self.now_ms, self.wall_ms, respond)
        elif isinstance(request, OffsetFetchRequest):
            respond(authorized_offset_fetch(request, core.fetch, allowed))

    # -- Fetch and Produce -----------------------------------------------------------------

    def _fetch(
        self, envelope: Envelope, request: FetchRequest, principal: Principal, host: str
    ) -> None:
        assert self.state is not None
        allowed = self._allowed(principal, host)
        acls = self.acls  # as judged on arrival: the answer reports these
        session: FetchContext | None = None
        if allowed is not None and request.replica_id >= 0 and not may_follow(allowed):
            # As the handler: every topic refused, and no session.
            denied = frozenset(t.topic for t in request.topics)
        else:
            session = open_fetch(self.state.fetch_sessions, request, self.now_ms)
            if session.error != ErrorCode.NONE:
                self.fetch_sessions_seen[f"fetches refused: {session.error.name}"] += 1
                self._respond(envelope, answer_fetch(session, FetchResponse(session.error, ())))
                return
            if session.incremental:
                self.fetch_sessions_seen["incremental fetches"] += 1
            elif request.session_epoch == INITIAL_EPOCH and session.session is None:
                self.fetch_sessions_seen["sessions refused: no room"] += 1
            request = session.request
            denied = fetch_denied(request, allowed) if allowed is not None else frozenset()

        def answer(response: FetchResponse) -> None:
            self._served(acls, principal, host, request, response)
            self._respond(envelope, answer_fetch(session, response) if session else response)

        fetch = DelayedFetch(request, denied)
        self.purgatory.complete(fetch, self.state, max_wait_ms(request), self.apply, answer)

    def _produce(
        self, envelope: Envelope, request: ProduceRequest, principal: Principal, host: str
    ) -> None:
        assert self.state is not None
        state = self.state
        # An idempotent producer's resend the leader recognised is answered below its log
        # end: appended at some earlier time, not now (ISR members may have crashed since).
        ends = {tp: p.log_end_offset for tp, p in self.partitions.items()}
        allowed = self._allowed(principal, host)
        acls = self.acls  # as judged on arrival: the answer reports these
        denied = {
            t: denied_message(principal, AclOperation.WRITE, ResourceType.TOPIC, t)
            for t in (produce_denied(request, allowed) if allowed is not None else ())
        }
        append = append_produce(state, request, self.wall_ms, denied=denied)
        produce = DelayedProduce(request, append)
        self._served(acls, principal, host, request, dict(append.results))
        self.apply(produce.take_actions())
        if request.acks == 0:
            return
        needed, now_ms = dict(append.waiting), self.now_ms
        resent = {tp for tp, r in append.results.items() if 0 <= r.base_offset < ends.get(tp, 0)}
        batches = {
            (t.name, d.index): d.records for t in request.topic_data for d in t.partition_data
        }

        def apply(actions: Actions) -> None:
            self.apply(actions)
            for tp in produce.acked:  # tell the invariants, with the ISR
                partition, records = self.partitions[tp], batches[tp]
                decoded = [r for b in decode_batches(records) for r in b.records]
                values = tuple(r.value or b"" for r in decoded)
                ack = Ack(
                    tp,
                    append.results[tp].base_offset,
                    needed[tp],
                    read_header(records).crc,
                    values,
                    self.broker_id,
                    partition.leader_epoch,
                    partition.isr,
                    0 if tp in resent else now_ms,
                    self.now_ms,
                    tuple(r.key for r in decoded),
                )
                for hook in self.world.on_ack:
                    hook(ack)

        respond = functools.partial(self._respond, envelope)
        self.purgatory.complete(produce, state, timeout_ms(request), apply, respond)
