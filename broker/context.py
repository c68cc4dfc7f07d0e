"""Everything a request handler may touch, in one object handed to each handler: the broker's
state (`broker.core.state.BrokerState`, what the decisions read and change) and its shells
(purgatory, and through the narrow interfaces of broker/services.py: ZooKeeper, the controller
candidate, fetchers, ISR writes, producer ids, the group coordinator)."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Hashable, Iterable
from dataclasses import InitVar, dataclass, field

import structlog
import trio

from broker.assembly import BrokerCores, broker_state, housekeeping_intervals
from broker.client_quotas import ClientQuotas
from broker.config.broker_config import BrokerConfig
from broker.core.actions import Actions
from broker.core.authorizer import AuthorizerSettings, authorize, authorize_any
from broker.core.controller_requests import FollowerChange
from broker.core.housekeeping import HousekeepingTask
from broker.core.isr import IsrWrite
from broker.core.metadata_cache import MetadataCache
from broker.core.principal import ANONYMOUS, Principal, parse_principal
from broker.core.replica_manager import ReplicaManager
from broker.core.request_acls import denied_message
from broker.core.scram import ScramCredential
from broker.core.state import METADATA_KEY, BrokerState, ElectedController
from broker.inter_broker import control_plane_security, inter_broker_security
from broker.purgatory import Purgatory
from broker.services import (
    NO_ZOOKEEPER,
    NOT_FETCHING,
    ControllerView,
    Fetchers,
    Groups,
    IsrWrites,
    NoGroups,
    NotController,
    ProducerIds,
    ZkAccess,
    no_producer_ids,
)
from client.security import ClientSecurity
from controller.zk_controller_election import read_elected_controller
from controller.zk_data import ZkDataError
from controller.zk_types import ZkError
from protocol.acl import CLUSTER_NAME, AclOperation, Acls, ResourceType
from protocol.errors import ErrorCode

__all__ = [
    "CLIENT_HOST",
    "METADATA_KEY",
    "SESSION",
    "BrokerContext",
    "Session",
    "monotonic_ms",
    "wall_clock_ms",
]

# The address of the client whose request is being handled (set per connection by the server).
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")


@dataclass(frozen=True, slots=True)
class Session:
    """Who sent the request being handled and where it came in (Kafka's RequestContext):
    set per connection by the server, again once the connection has authenticated."""

    principal: Principal = ANONYMOUS
    client_host: str = ""
    listener: str | None = None  # None: not through a listener (in-process callers)


SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar(
    "session",
    default=Session(),  # noqa: B039 (frozen: never mutated, replaced with .set())
)


_authorizer_log = structlog.get_logger("highwater.authorizer")
_log = structlog.get_logger(__name__)

# A controller request whose (id, epoch) ZooKeeper does not confirm is read again this many
# times, this far apart, before it is refused: the ZooKeeper server this broker reads from
# may lag the one the new controller wrote its election through by a few milliseconds.
_ELECTION_READS = 5
_ELECTION_READ_INTERVAL_S = 0.1


def wall_clock_ms() -> int:
    """The wall clock: for times that are stored or compared with stored ones (segment
    times, retention, record and commit timestamps). It may jump either way (NTP, an
    operator), so no timer or timeout reads it."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """The clock of timers, timeouts and lag checks: it never jumps."""
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class BrokerContext:
    config: BrokerConfig
    replica_manager: ReplicaManager
    state: BrokerState = field(init=False)
    purgatory: Purgatory = field(default_factory=Purgatory)
    # The shells, through the narrow interfaces of broker/services.py. Until main.py starts
    # each, a stand-in answers as a broker that has not started it yet does.
    zk: ZkAccess = NO_ZOOKEEPER  # an in-process broker has none (nothing to ask)
    controller: ControllerView = field(default_factory=NotController)  # its candidate
    fetchers: Fetchers = NOT_FETCHING  # followers' fetching
    isr_writes: IsrWrites = field(init=False)  # without ZooKeeper: they fail at once
    producer_ids: ProducerIds = field(default_factory=no_producer_ids)  # InitProducerId
    group_coordinator: Groups = field(default_factory=NoGroups)  # consumer groups
    cluster_id: str | None = None
    # SCRAM credentials by (user, mechanism), as stored in /config/users
    # (config/change_listener.py).
    credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    # Every ACL, as stored in ZooKeeper (acl_changes.py); checked when authorizer.class.name
    # is set.
    acls: Acls = field(default_factory=Acls)
    _authorizer: AuthorizerSettings | None = field(init=False, default=None)
    # Client quotas as stored in /config/users and /config/clients (config/change_listener.py).
    client_quotas: ClientQuotas = field(init=False)
    housekeeping_intervals_ms: dict[HousekeepingTask, int] = field(init=False)
    # Held while topic configs are read from ZooKeeper and applied (LeaderAndIsr, config
    # changes): whichever reads later applies later, so no stale read wins.
    config_lock: trio.Lock = field(default_factory=trio.Lock)
    _registered: trio.Event = field(default_factory=trio.Event)
    # What broker.assembly.assemble built (broker/main.py); without it (in-process brokers)
    # the same functions build them here.
    cores: InitVar[BrokerCores | None] = None

    @property
    def inter_broker_security(self) -> ClientSecurity | None:
        """How this broker connects to others (their inter-broker listener)."""
        return inter_broker_security(self.config)

    @property
    def control_plane_security(self) -> ClientSecurity | None:
        """How this broker reaches others' control-plane listener (the controller's requests,
        ControlledShutdown)."""
        return control_plane_security(self.config)

    def on_control_plane(self) -> bool:
        """Whether the request being handled, one meant for brokers only, came in on the
        listener that takes them (control.plane.listener.name, else the inter-broker one);
        a refusal is logged."""
        if self.config.takes_controller_requests(SESSION.get().listener):
            return True
        self.log_refused("controller request refused: not the control-plane listener")
        return False

    def log_refused(self, event: str) -> None:
        """Log a request refused for where or from whom it came (not an ACL denial)."""
        session = SESSION.get()
        _log.warning(
            event,
            listener=session.listener,
            principal=str(session.principal),
            host=session.client_host,
        )

    def __post_init__(self, cores: BrokerCores | None) -> None:
        config = self.config
        if cores is None:
            self.state = broker_state(config, self.replica_manager, monotonic_ms())
            self.housekeeping_intervals_ms = housekeeping_intervals(config)
        else:
            assert cores.replica_manager is self.replica_manager
            self.state = cores.state
            self.housekeeping_intervals_ms = cores.housekeeping_intervals_ms
        self.isr_writes = _FailAtOnce(self)
        self.client_quotas = ClientQuotas(
            config.quota_window_size_seconds * 1000, config.quota_window_num
        )
        if config.authorizer_enabled:
            self._authorizer = AuthorizerSettings(
                config.super_users, config.allow_everyone_if_no_acl_found
            )

    # -- authorization: every handler asks here, once per resource ---------------------------

    @property
    def authorizing(self) -> bool:
        """Whether requests are checked against ACLs (authorizer.class.name is set)."""
        return self._authorizer is not None

    def authorize(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """May the principal of the request being handled do this? (SESSION says who.)
        Always, without an authorizer. A denial is logged, as Kafka's authorizer logger does,
        unless it is only the first of two ways in (Kafka's logIfDenied = false)."""
        settings = self._authorizer
        if settings is None:
            return True
        session = SESSION.get()
        allowed = authorize(
            self.acls,
            settings,
            session.principal,
            session.client_host,
            operation,
            resource_type,
            name,
        )
        if not allowed and log_denied:
            _authorizer_log.info(
                "denied",
                principal=str(session.principal),
                host=session.client_host,
                operation=operation.name,
                resource=f"{resource_type.name}:{name}",
            )
        return allowed

    def denied(self, operation: AclOperation, resource_type: ResourceType, *names: str) -> str:
        """A refusal's error_message for the request being handled (`denied_message`)."""
        return denied_message(SESSION.get().principal, operation, resource_type, *names)

    def authorize_cluster(self, operation: AclOperation, *, log_denied: bool = True) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of this type?"""
        settings = self._authorizer
        if settings is None:
            return True
        session = SESSION.get()
        return authorize_any(
            self.acls, settings, session.principal, session.client_host, operation, resource_type
        )

    def may_describe_as(self, principal: str, host: str, topic: str) -> bool:
        """May `principal` (as recorded, "User:alice"; unparsable: ANONYMOUS) from `host`
        DESCRIBE `topic`? For decisions made for a client outside its own request (a group
        member's regex, resolved again on another member's heartbeat). Not logged."""
        settings = self._authorizer
        if settings is None:
            return True
        try:
            who = parse_principal(principal)
        except ValueError:
            who = ANONYMOUS
        return authorize(
            self.acls, settings, who, host, AclOperation.DESCRIBE, ResourceType.TOPIC, topic
        )

    @property
    def metadata(self) -> MetadataCache:
        return self.state.metadata

    @property
    def broker_id(self) -> int:
        return self.replica_manager.broker_id

    @property
    def broker_epoch(self) -> int:
        return self.state.broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, value: int) -> None:
        self.state.broker_epoch = value

    def now_ms(self) -> int:
        """Monotonic: what the cores' `now_ms` means (timers, lag, timeouts)."""
        return monotonic_ms()

    def wall_ms(self) -> int:
        """The wall clock: what the cores' `wall_ms` and the log's `now_ms` mean."""
        return wall_clock_ms()

    def registered(self, broker_epoch: int) -> None:
        """This process's registration znode exists, with this czxid (again, after a session
        expiry): controller requests are admitted from now on."""
        self.state.broker_epoch = broker_epoch
        self._registered.set()

    async def admit_controller_request(
        self, controller_id: int, controller_epoch: int, broker_epoch: int
    ) -> ErrorCode:
        """Wait (bounded) until this process has registered, then fence the request (see
        `BrokerState.admit_controller_request`) against the controller ZooKeeper names. Kafka
        processes requests only once it has registered: until then the controller may still
        address a previous, crashed process of this broker id, and a request held here, not
        refused, is not lost."""
        if self.state.broker_epoch < 0:
            with trio.move_on_after(self.config.request_timeout_ms / 1000):
                await self._registered.wait()
        elected = await self._elected_controller(controller_id, controller_epoch)
        refused = self.state.admit_controller_request(
            controller_epoch, broker_epoch, controller_id=controller_id, elected=elected
        )
        if refused != ErrorCode.NONE:
            session = SESSION.get()
            _log.warning(
                "controller request refused",
                error=refused.name,
                controller_id=controller_id,
                controller_epoch=controller_epoch,
                elected=None if elected is None else (elected.broker_id, elected.epoch),
                principal=str(session.principal),
                host=session.client_host,
                listener=session.listener,
            )
        return refused

    async def _elected_controller(
        self, controller_id: int, controller_epoch: int
    ) -> ElectedController | None:
        """The controller ZooKeeper names: as this broker's controller candidate last saw it
        (it watches /controller), else read afresh when that does not match the request (a
        new controller's first requests may come before the watch fires). None without
        ZooKeeper (in-process brokers): nothing to check against."""
        if self.zk.absent:
            return None
        candidate = self.controller
        seen = ElectedController(candidate.controller_id, candidate.controller_epoch)
        if seen.sent(controller_id, controller_epoch):
            return seen
        elected = ElectedController(-1, -1)
        for attempt in range(_ELECTION_READS):
            if attempt:
                await trio.sleep(_ELECTION_READ_INTERVAL_S)
            try:
                elected = ElectedController(*await self.zk.run(read_elected_controller()))
            except (ZkError, ZkDataError) as exc:
                _log.warning("cannot read the elected controller", error=str(exc))
                return ElectedController(-1, -1)  # unconfirmed: refused, never adopted
            if elected.sent(controller_id, controller_epoch) or elected.epoch > controller_epoch:
                break  # confirmed, or ZooKeeper is past the request (no lag to wait out)
        return elected

    # -- carrying out what the core decided ------------------------------------------------

    def wake(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self.purgatory.notify(key)

    def write_isr(self, writes: Iterable[IsrWrite]) -> None:
        """Start the ISR writes the core decided."""
        for write in writes:
            self.isr_writes.start_write(write)

    def apply(self, actions: Actions) -> None:
        """What a core step asked for: a controller request's outcome, a delayed
        operation's try (Purgatory.complete's `apply`)."""
        self.change_followers(actions.follower_changes)
        self.wake(actions.complete_keys)
        self.write_isr(actions.isr_writes)
        if actions.group_resync:
            self.partitions_changed()

    def partitions_changed(self) -> None:
        """After a controller request: the group coordinator follows the offsets partitions
        this broker leads."""
        self.group_coordinator.sync_partitions()

    def change_followers(self, changes: Iterable[FollowerChange]) -> None:
        for change in changes:
            self.fetchers.apply(change)


@dataclass(frozen=True, slots=True)
class _FailAtOnce:
    """The ISR writes of a broker without ZooKeeper (in-process, or before broker/main.py
    starts its IsrManager): each fails at once, as a write ZooKeeper refused."""

    ctx: BrokerContext

    def start_write(self, write: IsrWrite) -> None:
        ctx = self.ctx
        partition = ctx.replica_manager.partitions.get(write.tp)
        if ctx.state.isr.written(write, partition, None, ctx.now_ms()):
            ctx.purgatory.notify(write.tp)
