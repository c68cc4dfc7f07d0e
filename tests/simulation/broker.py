"""One simulated broker process: the broker's cores (broker.core) driven by simulated time.

The glue only does what trio, sockets and kazoo do for the real broker: it delivers requests
to the same core functions the handlers call, parks fetches and acks=all produces until a
key they wait on is woken or their deadline passes (the purgatory: the same delayed
operations as the real broker's, broker.core.delayed), runs the ISR writes and
the followers' requests, and keeps the timers. A crash loses the process and unflushed data;
the log directory (segments, checkpoint files) survives and is recovered by the real
LogManager at the next start. A full disk fails its writes: the real log dir failure path
runs (KIP-112), and this glue does what broker/log_dir_failure.py does.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, TypeVar, assert_never, cast

from broker.assembly import assemble
from broker.config.dynamic_update import (
    BrokerDefaults,
    apply_config_update,
    entities_to_read,
    open_log_configs,
    plan_config_update,
    with_dynamic_defaults,
)
from broker.core.acl_admin import (
    ACL_CHANGE_ATTEMPTS,
    KEPT_CHANGING,
    Entries,
    FilterDeletion,
    Outcome,
    adder,
    binding_of,
    dropper,
    filter_of,
)
from broker.core.actions import Actions
from broker.core.authorizer import authorize
from broker.core.cleaner_manager import CleanerManager
from broker.core.cleaning_pass import CleaningOutcome, choose_cleaning, finish_cleaning
from broker.core.controlled_shutdown import Ask, ShutdownAttempts, Stop, Wait
from broker.core.controller_requests import (
    ControllerRequestOutcome,
    FollowerChange,
    apply_leader_and_isr,
    apply_stop_replica,
    apply_update_metadata,
)
from broker.core.delayed import DelayedFetch, DelayedProduce
from broker.core.fetch import max_wait_ms
from broker.core.fetch_session import FetchContext, FetchSessionCache, answer_fetch, open_fetch
from broker.core.follower import FetchState, FollowerSet
from broker.core.group.find_coordinator import (
    answer_find_coordinator,
    find_coordinator_refusals,
)
from broker.core.housekeeping import HousekeepingSchedule
from broker.core.isr import IsrWrite
from broker.core.offset_for_leader_epoch import answer_offset_for_leader_epoch
from broker.core.partition import Partition
from broker.core.principal import Principal
from broker.core.produce import (
    append_produce,
    timeout_ms,
)
from broker.core.request_acls import (
    Allowed,
    describable_offsets,
    fetch_denied,
    find_coordinator_denied,
    heartbeat_denied,
    may_change_acls,
    may_fetch_offsets,
    may_follow,
    offset_commit_denied,
    produce_denied,
    split_offset_commit,
)
from broker.core.state import BrokerState
from broker.housekeeping import perform
from broker.log.cleaner import clean
from broker.log.manager import LogManager
from controller.core import ControlledShutdownReply, ControlledShutdownRequested
from controller.zk_acls import (
    ACL_CHANGES_PATHS,
    AclsChangedError,
    change_acls,
    read_all_acls,
    watch_acl_changes,
)
from controller.zk_brokers import publish_log_dir_failure, set_offline_partitions, try_register
from controller.zk_configs import (
    BROKERS,
    TOPICS,
    get_entity_config,
    purge_expired_changes,
    read_config_changes,
)
from controller.zk_data import CONFIG_CHANGES_PATH, DEFAULT_BROKER_ENTITY, BrokerRegistration
from controller.zk_isr import publish_isr_changes, write_isr
from controller.zk_script import ZkScript
from controller.zk_topics import get_topic_config
from controller.zk_types import WatchEvent, ZkError
from protocol.acl import AccessControlEntry, AclOperation, Acls, ResourcePattern, ResourceType
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.create_acls import (
    AclCreation,
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.messages.describe_acls import AclFilterSpec
from protocol.messages.fetch import INITIAL_EPOCH, FetchRequest, FetchResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.records import decode_batches, iter_batch_headers, read_header
from protocol.topic_partition import TopicPartition
from tests.simulation.acl_workload import (
    BROKER,
    CLIENT_HOST,
    SETTINGS,
    Authenticated,
    Decision,
    Served,
)
from tests.simulation.classic_shell import CLASSIC_REQUESTS, serve_classic
from tests.simulation.controller_shell import ControllerAsk, SimController, campaign
from tests.simulation.disk import CrashCut, MirroredLog, SimDisk, SimSegment, crash
from tests.simulation.fetcher import SimFetcher
from tests.simulation.group_shell import SimGroupCoordinator
from tests.simulation.invariants import InvariantViolation
from tests.simulation.network import Envelope
from tests.simulation.process import SimProcess
from tests.simulation.purgatory import SimPurgatory
from tests.simulation.world import Ack, World

__all__ = ["SimBroker"]

T = TypeVar("T")
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


class SimBroker(SimProcess):
    def __init__(self, world: World, broker_id: int, data_dir: Path) -> None:
        super().__init__(world.scheduler, f"b{broker_id}")
        self.world = world
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.session_id: int | None = None
        self.crashes = 0
        self.last_crash_ms = -1
        self.last_crash: dict[TopicPartition, CrashCut] = {}
        self.lost_data_in_last_crash = False
        self.shutting_down = False  # a controlled shutdown is under way
        self.shutdown_attempts: ShutdownAttempts | None = None  # the last one's, for views
        self.disk = SimDisk(world.rng)
        SimSegment.disks[data_dir] = self.disk
        self.fetch_sessions_seen: Counter[str] = Counter()  # across incarnations, for the report
        self._reset()

    def _reset(self) -> None:
        self.log_manager: LogManager | None = None
        self.state: BrokerState | None = None
        self.followers: FollowerSet | None = None
        self.fetchers: dict[int, SimFetcher] = {}
        self.purgatory = SimPurgatory(self)
        self.controller: SimController | None = None
        self.groups: SimGroupCoordinator | None = None
        # Every ACL, as last read from ZooKeeper (broker/acl_changes.py); with an authorizer.
        self.acls = Acls()
        # The config change listener's (broker/config/change_listener.py): the defaults in
        # force here, and the last notification handled.
        self.config_defaults: BrokerDefaults = self.world.static_defaults
        self._config_changes_seen = -1
        # The broker epoch of this process's first registration: its incarnation.
        self.first_broker_epoch: int | None = None
        # Partitions whose log went offline in this process, and when.
        self.offline_since: dict[TopicPartition, int] = {}

    # -- views (scenario tests and invariants) ---------------------------------------------

    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        return self.state.replica_manager.partitions if self.state is not None else {}

    @property
    def logs(self) -> dict[TopicPartition, MirroredLog]:
        logs = self.log_manager.logs if self.log_manager is not None else {}
        return cast("dict[TopicPartition, MirroredLog]", logs)

    @property
    def broker_epoch(self) -> int:
        return self.state.broker_epoch if self.state is not None else -1

    @property
    def controller_epoch(self) -> int:
        return self.state.controller_epoch if self.state is not None else -1

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        return self.followers.fetch_state(tp) if self.followers is not None else None

    @property
    def wall_ms(self) -> int:
        """The wall clock the cores date stored things by (`wall_ms`, the log's `now_ms`);
        here the scheduler's clock, as `now_ms` (timers)."""
        return self.now_ms

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """(Re)start the process: recover the logs, register in ZooKeeper, start timers."""
        assert not self.alive
        self.alive = True
        self.shutting_down = False
        self.incarnation += 1
        self._reset()
        world, config = self.world, self.world.config
        broker_config = world.broker_config(self.broker_id, self.data_dir)
        self.log_manager = LogManager(
            [self.data_dir], broker_config.log_config(), log_class=MirroredLog
        )
        self.log_manager.startup(self.wall_ms)
        # Few slots now and then, so sessions are evicted and clients start over. A random of
        # its own: the world's stream (network delays, faults) stays what the seed made it.
        sessions_rng = random.Random(world.seed * 1009 + self.broker_id * 31 + self.incarnation)
        slots = sessions_rng.choice((1, 2, 1000))  # Kafka's default is 1000
        sessions = FetchSessionCache(slots, lambda: sessions_rng.randrange(1, 2**31 - 1))
        cores = assemble(broker_config, self.log_manager, self.now_ms, fetch_sessions=sessions)
        cores.replica_manager.on_offline = self._offline_soon
        self.state = cores.state
        self.followers = FollowerSet(self.state, cores.fetcher_settings)
        world.trace(
            f"b{self.broker_id} started (incarnation {self.incarnation}); logs "
            + ", ".join(f"{tp}: LEO {log.log_end_offset}" for tp, log in sorted(self.logs.items()))
        )
        self._new_session()
        self.every(config.replica_lag_time_max_ms // 2, "isr-expiration", self._shrink_isrs)
        self.every(config.isr_change_propagation_interval_ms, "isr-propagation", self._propagate)
        self._housekeeping = HousekeepingSchedule.start(
            cores.housekeeping_intervals_ms, self.now_ms
        )
        self._schedule_housekeeping()
        self.after(world.draw(config.log_flush_interval_ms), "log-flush", self._flush_logs)
        if config.consumer_groups:
            self.groups = SimGroupCoordinator(self)
        self.cleaner = CleanerManager(self.log_manager.read_cleaned())
        if config.compacted_topic and self.broker_id % 3 != 0:  # some brokers clean
            self.every(world.draw(config.cleaner_interval_ms), "log-cleaner", self._clean)

    def crash(
        self, keep: Literal["random", "all", "flushed"] = "random", torn: bool | None = None
    ) -> dict[TopicPartition, CrashCut]:
        """Power loss (see disk.crash for `keep`; `torn` forces or forbids a torn tail):
        ZooKeeper notices only when the session times out."""
        assert self.alive and self.log_manager is not None
        config = self.world.config
        torn_probability = config.torn_tail_probability if torn is None else float(torn)
        cuts = {
            tp: crash(log, self.world.rng, torn_probability, keep=keep)
            for tp, log in sorted(self.logs.items())
        }
        self.log_manager.abandon()
        self.last_crash = cuts
        self.lost_data_in_last_crash = any(
            c.kept_offset < c.log_end_offset or c.torn_bytes for c in cuts.values()
        )
        self.crashes += 1
        self.last_crash_ms = self.now_ms
        self._end_process()
        session, self.session_id = self.session_id, None
        if session is not None:
            zk = self.world.zk
            self.world.scheduler.after(
                config.zk_session_timeout_ms,
                f"zk session of b{self.broker_id} expires",
                lambda: zk.expire_session(session),
            )
        for hook in self.world.on_crash:
            hook(self.broker_id)
        return cuts

    def stop(self) -> None:
        """A clean stop (after a controlled shutdown): flush, checkpoint, close the session."""
        assert self.alive and self.log_manager is not None and self.state is not None
        self.state.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown(self.wall_ms)
        self.lost_data_in_last_crash = False
        self.world.trace(f"b{self.broker_id} stopped cleanly")
        self._end_process()
        session, self.session_id = self.session_id, None
        if session is not None:
            self.world.zk.expire_session(session)  # closed: its nodes go at once

    def shut_down(self) -> None:
        """SIGTERM: ask the controller to move our leaderships away, as often and for as long
        as broker/core/controlled_shutdown.py says (broker/controlled_shutdown.py's loop),
        then stop cleanly either way."""
        assert self.state is not None
        self.shutting_down = True
        config = self.world.config
        attempts = ShutdownAttempts.start(
            self.now_ms,
            max_retries=config.controlled_shutdown_max_retries,
            retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
            timeout_ms=config.controlled_shutdown_timeout_ms,
        )
        self.shutdown_attempts = attempts
        self._shutdown_step(attempts)

    def _shutdown_step(self, attempts: ShutdownAttempts) -> None:
        step = attempts.next_step(self.now_ms, zk_connected=self.session_id is not None)
        match step:
            case Stop():
                self.world.trace(f"b{self.broker_id} controlled shutdown ends: {step.reason.value}")
                self.stop()
            case Wait(delay_ms):
                self.after(delay_ms, "controlled shutdown", lambda: self._shutdown_step(attempts))
            case Ask():
                self._ask_shutdown(attempts, step)
            case _:
                assert_never(step)

    def _ask_shutdown(self, attempts: ShutdownAttempts, step: Ask) -> None:
        """One attempt: the controller's answer, or none within the step's timeout."""
        assert self.state is not None
        event = ControlledShutdownRequested(self.broker_id, self.state.broker_epoch)
        incarnation, done = self.incarnation, [False]

        def answered(reply: object) -> None:
            if not self.alive or self.incarnation != incarnation or done[0]:
                return  # crashed meanwhile, or this attempt already ended
            done[0] = True
            if isinstance(reply, ControlledShutdownReply) and reply.error_code == ErrorCode.NONE:
                self.world.trace(f"b{self.broker_id} controlled shutdown accepted: {reply}")
                attempts.attempt_accepted()
            else:
                attempts.attempt_failed(self.now_ms)
            self._shutdown_step(attempts)

        controller = self.world.zk.controller
        if controller is None:
            answered(None)
        elif self.controller is not None and self.controller.active:
            self.controller.ask(event, answered)
            self.after(step.timeout_ms, "controlled shutdown times out", lambda: answered(None))
        else:
            self.world.net.request(
                self.broker_id,
                controller[0],
                ControllerAsk(event),
                timeout_ms=step.timeout_ms,
                on_response=answered,
                on_timeout=lambda: answered(None),
                label=f"ControlledShutdown b{self.broker_id}->b{controller[0]}",
            )

    def _end_process(self) -> None:
        self.alive = False
        self.incarnation += 1
        if self.controller is not None:
            self.controller.die()
        self._reset()

    def expire_session(self, reconnect_ms: int | None = None) -> None:
        """ZooKeeper expired our session (not a crash): re-register with a new one, after
        ZooKeeper's latency or `reconnect_ms` (ZooKeeper unreachable until then); a
        controller resigns at once (it can no longer write anything)."""
        if self.session_id is None:
            return
        self.world.zk.expire_session(self.session_id)
        self.session_id = None
        if self.controller is not None:
            self.controller.resign("zookeeper session expired")
        if reconnect_ms is None:
            reconnect_ms = self.world.draw(self.world.config.zk_latency_ms)
        self.after(reconnect_ms, "new session", self._new_session)

    def _new_session(self) -> None:
        self.session_id = self.world.zk.open_session(self.broker_id)
        if self.world.config.authorizer:  # a new session has no watches: read them all again
            self._reload_acls()
        # Dynamic configs before registering: LeaderAndIsr must find them in place. Only
        # with `dynamic_configs`: the listener's watch deliveries draw from the world's
        # random stream, and the other seed sets keep the runs their seeds always made.
        if self.world.config.dynamic_configs:
            self._apply_config_changes(everything=True)
        self._register()

    def _register(self) -> None:
        """broker/registration.py: wait for a node left by an older session to expire."""
        assert self.state is not None
        registration = BrokerRegistration(
            "127.0.0.1",
            9090 + self.broker_id,
            None,
            self.now_ms,
            self.first_broker_epoch,
            offline_partitions=tuple(sorted(self.state.replica_manager.offline)),
        )
        epoch = self._zk_run(try_register(self.broker_id, registration, self.session_id))
        if epoch is None:
            retry_ms = self.world.config.broker_registration_retry_ms
            self.after(retry_ms, "register", self._register)
            return
        if self.first_broker_epoch is None:
            self.first_broker_epoch = epoch
        self.state.broker_epoch = epoch
        self.world.trace(f"b{self.broker_id} registered, broker epoch {epoch}")
        campaign(self.world, self)

    def on_watch(self, event: WatchEvent) -> None:
        """A ZooKeeper watch of our session fired (the ACL listener's, the controller's, or
        the candidate's)."""
        if event.path in ACL_CHANGES_PATHS and self.world.config.authorizer:
            self._reload_acls()
        elif event.path == CONFIG_CHANGES_PATH and self.world.config.dynamic_configs:
            self._apply_config_changes(everything=False)
        elif self.controller is not None:
            self.controller.enqueue(event)
        elif event.path == "/controller":
            campaign(self.world, self)

    def _schedule_housekeeping(self) -> None:
        """Kafka's scheduler, as the trio shell runs it (broker.main._housekeeping)."""
        self.after(
            self._housekeeping.next_due_ms() - self.now_ms, "housekeeping", self._run_housekeeping
        )

    def _run_housekeeping(self) -> None:
        assert self.log_manager is not None and self.state is not None
        for task in self._housekeeping.take_due(self.now_ms):
            perform(
                task,
                self.log_manager,
                self.state.replica_manager,
                wall_ms=self.wall_ms,
                monotonic_ms=self.now_ms,
            )
        self._schedule_housekeeping()

    def checkpoint(self) -> None:
        """The replication-offset-checkpoint (HWs)."""
        if self.state is not None:
            self.state.replica_manager.checkpoint_high_watermarks()

    def flush(self, *, hws: bool = True) -> None:
        """fsync every log, so the recovery points (and their checkpoint) move up; with
        `hws`, checkpoint the HWs too (a clean moment, for scripted tests)."""
        assert self.log_manager is not None
        for log in self.logs.values():
            log.flush()
        self.log_manager.checkpoint(self.wall_ms)
        if hws:
            self.checkpoint()

    def _flush_logs(self) -> None:
        """log.flush.interval: now and then the logs are fsynced."""
        self.flush(hws=False)
        config = self.world.config
        self.after(self.world.draw(config.log_flush_interval_ms), "log-flush", self._flush_logs)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        if self.log_manager is not None:
            self.log_manager.abandon()

    # -- requests --------------------------------------------------------------------------

    def _respond(self, envelope: Envelope, payload: object) -> None:
        self.world.net.respond(envelope, payload)

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
                lambda key: f"{principal} may not DESCRIBE group {key}",
            )
            respond(answer_find_coordinator(request, refused, self.state.metadata, None))
        elif isinstance(request, ConsumerGroupHeartbeatRequest):
            if allowed is not None:
                code, names = heartbeat_denied(request, allowed)
                if code != ErrorCode.NONE:
                    return respond(ConsumerGroupHeartbeatResponse(code, f"{principal}: {names}"))
                decision = core.heartbeat(
                    request,
                    groups.topics(),
                    self.now_ms,
                    "sim",
                    wall_ms=self.wall_ms,
                    principal=str(principal),
                )
            else:
                decision = core.heartbeat(
                    request, groups.topics(), self.now_ms, "sim", wall_ms=self.wall_ms
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
            if allowed is not None and not may_fetch_offsets(request, allowed):
                return respond(OffsetFetchResponse((), ErrorCode.GROUP_AUTHORIZATION_FAILED))
            fetched = core.fetch(request)
            respond(describable_offsets(request, fetched, allowed) if allowed else fetched)

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

    def apply(self, actions: Actions) -> None:
        """As BrokerContext.apply, in the same order."""
        self._change_followers(actions.follower_changes)
        self.purgatory.wake(actions.complete_keys)
        self._write_isr(actions.isr_writes)
        if actions.group_resync and self.groups is not None:
            self.groups.sync()

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
            t: f"{principal} may not WRITE topic {t}"
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

    # -- authorization (broker/context.py's authorize; broker/handlers/acls.py) -------------

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
        """CreateAcls and DeleteAcls, as broker/handlers/acls.py (its ZooKeeper writes are
        synchronous here)."""
        allowed = self._allowed(principal, host)
        acls = self.acls  # as judged on arrival: the answer reports these
        response: CreateAclsResponse | DeleteAclsResponse
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        message = f"{principal} may not ALTER cluster kafka-cluster"
        if isinstance(request, CreateAclsRequest):
            if allowed is None or not may_change_acls(allowed):
                failed = AclCreationResult(refused, message)
                response = CreateAclsResponse(tuple(failed for _ in request.creations))
            else:
                response = CreateAclsResponse(tuple(self._create(c) for c in request.creations))
        elif allowed is None or not may_change_acls(allowed):
            failed_filter = DeleteAclsFilterResult(refused, message)
            response = DeleteAclsResponse(tuple(failed_filter for _ in request.filters))
        else:
            response = DeleteAclsResponse(tuple(self._delete(f) for f in request.filters))
        self._served(acls, principal, host, request, response)
        self._respond(envelope, response)

    def _create(self, creation: AclCreation) -> AclCreationResult:
        try:
            binding = binding_of(creation)
        except ValueError as exc:
            return AclCreationResult(ErrorCode.INVALID_REQUEST, str(exc))
        return AclCreationResult(*self._change_acls(binding.pattern, adder(binding.entry)))

    def _delete(self, spec: AclFilterSpec) -> DeleteAclsFilterResult:
        try:
            wanted = filter_of(spec)
        except ValueError as exc:
            return DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, str(exc))
        found = self._zk_run(read_all_acls())
        if found is None:
            return DeleteAclsFilterResult(ErrorCode.UNKNOWN_SERVER_ERROR, "ZooKeeper")
        deletion = FilterDeletion(wanted)
        for pattern in deletion.patterns(found[0].bindings()):
            removed: set[AccessControlEntry] = set()
            outcome = self._change_acls(pattern, dropper(wanted, pattern, removed))
            deletion.written(pattern, outcome, removed)
        return deletion.result()

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

    # -- the ISR upkeep --------------------------------------------------------------------

    def _shrink_isrs(self) -> None:
        assert self.state is not None
        partitions = [p for _, p in sorted(self.partitions.items())]
        self._write_isr(self.state.isr.shrink(partitions, self.now_ms))

    def _write_isr(self, writes: Iterable[IsrWrite]) -> None:
        for write in writes:
            # IsrManager.start_write: its own task, so it may start a little later.
            delay_ms = self.world.rng.randint(0, 2)
            self.after(delay_ms, f"isr write {write.tp}", functools.partial(self._isr_write, write))

    def _isr_write(self, write: IsrWrite) -> None:
        """The CAS happens now; its answer arrives after ZooKeeper's latency."""
        assert self.state is not None
        if not self.state.isr.still_wanted(write, self.partitions.get(write.tp)):
            return
        version = self._zk_run(write_isr(write.tp, write.znode, write.expected_version))
        self.world.trace(
            f"b{self.broker_id} {write.tp}: isr write {list(write.znode.isr)} at pe "
            f"{write.expected_version}: " + ("lost" if version is None else f"pe {version}")
        )

        def done() -> None:
            assert self.state is not None
            partition = self.partitions.get(write.tp)
            if self.state.isr.written(write, partition, version, self.now_ms):
                self.purgatory.wake([write.tp])

        self.after(self.world.draw(self.world.config.zk_latency_ms), "isr write done", done)

    def _propagate(self) -> None:
        assert self.state is not None
        changed = self.state.isr.to_propagate(self.now_ms)
        if changed is not None:
            ok = self._zk_run(publish_isr_changes(changed)) is not None
            self.state.isr.propagated(changed, ok, self.now_ms)

    # -- the log cleaner (broker/log_cleaner.py) ---------------------------------------------

    def _clean(self) -> None:
        """The work is done now, on the files as they are; the swap comes a while later, as
        after a child process's run, so the log may have changed meanwhile."""
        assert self.state is not None
        chosen = choose_cleaning(self.cleaner, self.state.replica_manager, self.wall_ms)
        if chosen is None:
            return
        candidate, log = chosen
        tp = candidate.tp
        task = log.cleaning_task(
            candidate.first_dirty_offset, candidate.end_offset, self.wall_ms, 1 << 20
        )
        result = clean(task)

        def swap() -> None:
            assert self.state is not None
            manager = self.state.replica_manager
            outcome = finish_cleaning(self.cleaner, manager, tp, log, task, result, self.wall_ms)
            if outcome is CleaningOutcome.CLEANED:
                self.world.cleanings += 1
                self.world.trace(f"b{self.broker_id} cleaned {tp} below {result.end_offset}")

        self.after(self.world.draw(self.world.config.cleaning_time_ms), "cleaner swaps", swap)

    # -- offline logs (broker/log_dir_failure.py) ------------------------------------------

    def _offline_soon(self) -> None:
        """The replica manager's hook (called mid-request): handle it as the next event."""
        self.after(0, "log dir failure", self._log_dir_failed)

    def _log_dir_failed(self) -> None:
        assert self.state is not None
        gone = self.state.replica_manager.take_offline()
        if not gone:
            return
        for tp in gone:
            self.offline_since.setdefault(tp, self.now_ms)
            self._check_no_torn_batch(tp)
        self.world.trace(f"b{self.broker_id} logs offline: {gone}")
        self._change_followers([FollowerChange(tp) for tp in gone])
        self.purgatory.wake(gone)
        if self.groups is not None:
            self.groups.sync()
        for hook in self.world.on_offline:
            hook(self.broker_id, gone)
        offline = sorted(self.state.replica_manager.offline)
        self._zk_run(set_offline_partitions(self.broker_id, offline, self.session_id))
        self._zk_run(publish_log_dir_failure(self.broker_id))  # lost with the session: the
        # re-registration lists them

    def _check_no_torn_batch(self, tp: TopicPartition) -> None:
        """An offline log's files hold whole batches only: a write that ran out of space was
        cut again (the simulated disk itself never fails that)."""
        directory = self.data_dir / f"{tp[0]}-{tp[1]}"
        for path in sorted(directory.glob("*.log")):
            try:
                for _ in iter_batch_headers(path.read_bytes()):
                    pass
            except HighwaterError as exc:
                raise InvariantViolation(
                    f"b{self.broker_id} left a torn batch in {tp[0]}-{tp[1]}/{path.name}: {exc}"
                ) from exc

    def fill_disk(self) -> None:
        self.disk.full = True

    def free_disk(self) -> None:
        self.disk.full = False

    # -- the followers ---------------------------------------------------------------------

    def _change_followers(self, changes: Iterable[FollowerChange]) -> None:
        assert self.followers is not None
        for change in changes:
            update = self.followers.apply(change)
            for follower in update.stopped:
                self.fetchers.pop(follower.leader.node_id).stopped = True
            if update.started is not None:
                fetcher = SimFetcher(self, update.started)
                self.fetchers[update.started.leader.node_id] = fetcher
                fetcher.wake(0)
            if update.woken is not None:
                self.fetchers[update.woken.leader.node_id].wake(0)

    # -- dynamic configs (broker/config/change_listener.py) -------------------------------

    def _apply_config_changes(self, *, everything: bool) -> None:
        """One round of the config change listener: the notifications since the last one
        (re-arming the watch), the entities they name (every one: `everything`), and the
        change to the open logs the core plans. A round that loses the session stops; the
        next session reads everything."""
        assert self.state is not None
        zk = self.world.zk
        try:
            changes = zk.run(
                self.session_id,
                read_config_changes(self._config_changes_seen, entities=not everything),
            )
            hosted = {tp.topic for tp in self.logs}
            to_read = entities_to_read(changes.entities, hosted, everything=everything)
            if to_read.defaults:
                stored = zk.run(self.session_id, get_entity_config(BROKERS, DEFAULT_BROKER_ENTITY))
                self.config_defaults, skipped = with_dynamic_defaults(
                    self.world.static_defaults, stored.config
                )
                assert not skipped, f"the operator stored dynamic defaults refused: {skipped}"
            topic_configs = {
                topic: zk.run(self.session_id, get_entity_config(TOPICS, topic)).config
                for topic in sorted(to_read.topics)
            }
        except ZkError:
            return
        current = open_log_configs(self.state, to_read.topics)
        update = plan_config_update(self.config_defaults, topic_configs, current)
        assert not update.problems, f"stored topic configs refused: {update.problems}"
        deleted = apply_config_update(self.state, update, self.wall_ms)
        self._config_changes_seen = changes.last
        if changes.entities or update.changed:
            self.world.trace(
                f"b{self.broker_id} applied config changes "
                f"{['/'.join(e) for e in changes.entities]}: {len(update.changed)} logs changed, "
                f"{deleted} segments deleted"
            )
        self._zk_run(purge_expired_changes(changes.children, self.wall_ms))

    # -- ZooKeeper -------------------------------------------------------------------------

    def _zk_run(self, script: ZkScript[T], *, raising: bool = False) -> T | None:
        """Run a ZooKeeper script in our session; None if it fails (session gone)."""
        try:
            return self.world.zk.run(self.session_id, script)
        except ZkError:
            if raising:
                raise
            return None
