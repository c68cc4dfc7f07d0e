"""A broker process: load the logs, join ZooKeeper, serve, and stop cleanly on SIGTERM.

Start-up order: recover the logs (a broker must not serve before its logs are consistent),
connect to ZooKeeper, start listening, register `/brokers/ids/<id>` (which tells the
controller we exist), start the replica fetchers and the ISR tasks, and stand as a controller
candidate. Shutdown reverses it: ask the controller to move our leaderships away (controlled
shutdown, bounded), stop being a controller candidate, stop accepting and drain in-flight
requests, checkpoint HWs, close the logs and write the clean-shutdown marker, then close the
ZooKeeper session (our registration vanishes with it). A failed start stops the same way.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import ssl
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio

from broker.acl_changes import AclChangeListener
from broker.assembly import assemble
from broker.config.broker_config import BrokerConfig, describe
from broker.config.change_listener import ConfigChangeListener
from broker.config.config_def import (
    metrics_listener_uses_tls,
    parse_metrics_listener,
    parse_per_ip_overrides,
)
from broker.context import BrokerContext, monotonic_ms, wall_clock_ms
from broker.controlled_shutdown import controlled_shutdown
from broker.core.connection_quotas import ConnectionLimits
from broker.core.housekeeping import HousekeepingSchedule, HousekeepingTask
from broker.core.scram import SCRAM_MECHANISMS, ScramCredential, make_credential, password_matches
from broker.group_coordinator import GroupCoordinator
from broker.housekeeping import perform
from broker.isr_manager import IsrManager
from broker.kafka.wire import WIRES
from broker.log.errors import LogStorageError
from broker.log.manager import LogManager
from broker.log_cleaner import LogCleaner
from broker.log_dir_failure import LogDirFailureHandler
from broker.logging_setup import bind_broker, configure_logging
from broker.producer_id_manager import ProducerIdManager
from broker.registration import BrokerIdInUseError, maintain_registration
from broker.replica_fetcher import ReplicaFetcherManager
from broker.request_stats import RequestStats
from broker.server import BrokerServer, ServedListener
from broker.tls import https_context, server_context
from client import clock
from client.lifecycle import exception_leaves
from client.runtime import tune_garbage_collector
from controller.controller import Controller, run_controller
from controller.settings import ControllerSettings
from controller.zk_client import ZkClient, ZkError
from controller.zk_configs import USERS, ConfigChangedError, get_entity_config, set_entity_config
from controller.zk_topics import get_or_create_cluster_id
from protocol.messages.update_metadata import ListenerEndpoint

__all__ = ["EXIT_FAILURE", "StartupError", "run_broker"]


EXIT_FAILURE = 1
# debug adds a line per request (with the connection's principal and listener).
LOG_LEVEL_ENV = "HIGHWATER_LOG_LEVEL"


class StartupError(Exception):
    """An expected reason the broker cannot start, with a message saying what to fix."""


async def run_broker(config: BrokerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the exit status: 0 after a clean shutdown, 1 when the
    broker cannot start (ZooKeeper unreachable, the listener's port taken, a log dir unusable,
    the broker id held by a live broker), said in one error event, not a traceback."""
    level = os.environ.get(LOG_LEVEL_ENV, "info")
    try:
        configure_logging(level=level)
    except ValueError:
        configure_logging()
        structlog.get_logger("highwater.broker").warning(
            f"{LOG_LEVEL_ENV} ignored: not a log level", value=level
        )
    bind_broker(config.broker_id)
    log = structlog.get_logger("highwater.broker")
    log.info("starting", config=dict(describe(config)))
    try:
        await _run(config, log)
    except Exception as exc:
        errors = list(exception_leaves(exc))  # a nursery raises a group
        if all(isinstance(error, StartupError) for error in errors):
            log.error("broker could not start", error="; ".join(map(str, errors)))
        else:
            log.exception("broker failed")  # a bug: its traceback goes into this one event
        return EXIT_FAILURE
    log.info("stopped cleanly")
    return 0


async def _run(config: BrokerConfig, log: structlog.typing.FilteringBoundLogger) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        listeners = _served_listeners(config)  # TLS files checked before the logs open
        log_manager = LogManager([Path(d) for d in config.log_dirs], config.log_config())
        try:
            log_manager.startup(wall_clock_ms())
        except (OSError, LogStorageError) as exc:
            raise StartupError(f"cannot open the log dirs: {exc}") from exc
        cores = assemble(config, log_manager, monotonic_ms())
        ctx = BrokerContext(config, cores.replica_manager, cores=cores)
        server = BrokerServer(
            ctx,
            config.listener_host,
            config.listener_port,
            config.socket_request_max_bytes,
            listeners=listeners,
            idle_timeout_s=config.connections_max_idle_ms / 1000,
            max_connections=_connection_limit(config.max_connections, log),
            limits=_connection_limits(config),
            failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
            auth_frame_bytes=config.sasl_server_max_receive_size,
            auth_timeout_s=config.connections_authentication_timeout_ms / 1000,
            max_reauth_ms=config.connections_max_reauth_ms,
            # Per-request figures only when someone can read them.
            request_stats=RequestStats() if config.metrics_listener else None,
        )
        zk: ZkClient | None = None
        try:
            async with trio.open_nursery() as nursery:
                # A signal during start-up (waiting for ZooKeeper, or for a predecessor's
                # registration to expire) stops the broker at once, as later.
                stopping, starting = trio.Event(), trio.CancelScope()
                nursery.start_soon(_wait_for_signal, signals, stopping, starting, log)
                candidacy = trio.CancelScope()  # the controller candidate's
                with starting:
                    try:
                        zk = await ZkClient.connect(
                            config.zookeeper_connect,
                            config.zookeeper_session_timeout_ms,
                            timeout_ms=config.zookeeper_connection_timeout_ms,
                            digest=config.zookeeper_digest,
                            set_acl=config.zookeeper_set_acl,
                        )
                        await _start(nursery, ctx, zk, server, log_manager, candidacy)
                    except (ZkError, BrokerIdInUseError) as exc:
                        connected = zk is not None and isinstance(exc, ZkError)
                        message = f"ZooKeeper: {exc}" if connected else str(exc)
                        raise StartupError(message) from exc
                    log.info("started", port=server.port)
                    tune_garbage_collector()  # docs/performance.md, "What mattered", item 2
                await stopping.wait()
                if config.controlled_shutdown_enable and not starting.cancelled_caught:
                    await controlled_shutdown(ctx, zk)
                # The controller (if we are it) resigns before requests drain: those waiting
                # for it (other brokers' controlled shutdowns) are answered NOT_CONTROLLER now.
                candidacy.cancel()
                await server.stop()
                nursery.cancel_scope.cancel()
        finally:
            # Also after a failed start: the logs close cleanly (the next start need not
            # recover them) and the session closes (its registration, if any, goes at once).
            with trio.CancelScope(shield=True):
                ctx.replica_manager.checkpoint_high_watermarks()
                log_manager.shutdown(wall_clock_ms())
                if zk is not None:
                    await zk.close()


async def _start(
    nursery: trio.Nursery,
    ctx: BrokerContext,
    zk: ZkClient,
    server: BrokerServer,
    log_manager: LogManager,
    candidacy: trio.CancelScope,
) -> None:
    """Listen, register, and start every task, in the order the module docstring gives; the
    controller candidate runs until `candidacy` is cancelled."""
    config = ctx.config
    ctx.zk = zk
    ctx.producer_ids = ProducerIdManager(zk, config.broker_id)
    ctx.cluster_id = await zk.run(get_or_create_cluster_id())
    if config.inter_broker_listener.security_protocol.uses_sasl:
        await _store_own_login(config, zk)
    # Credentials and ACLs before the first client: a SASL login or a request must not be
    # judged without them. Dynamic configs before registering too: LeaderAndIsr must find
    # them in place.
    await nursery.start(
        ConfigChangeListener(ctx, zk, on_credentials_revoked=server.close_sessions_of).run
    )
    if config.authorizer_enabled:
        await nursery.start(AclChangeListener(ctx, zk).run)
    try:
        await nursery.start(server.run)
    except OSError as exc:
        wanted = ", ".join(f"{x.host}:{x.port}" for x in config.all_listeners())
        raise StartupError(f"cannot listen on {wanted}: {exc.strerror or exc}") from exc
    # Fetchers and ISR tasks first: the controller's LeaderAndIsr may come as soon as we
    # have registered.
    ctx.fetchers = fetchers = ReplicaFetcherManager(ctx)
    await nursery.start(fetchers.run)
    ctx.isr_writes = isr_manager = IsrManager(ctx, zk)
    await nursery.start(isr_manager.run)
    await nursery.start(LogDirFailureHandler(ctx, zk).run)
    ctx.group_coordinator = coordinator = GroupCoordinator(ctx)
    await nursery.start(coordinator.run)
    # listeners=...:0 binds any free port; advertise the one actually bound.
    endpoints = tuple(
        ListenerEndpoint(
            x.name,
            str(x.security_protocol),
            x.advertised_host,
            x.advertised_port or server.ports[x.name],
        )
        for x in config.all_listeners()
    )
    inter_broker = next(e for e in endpoints if e.listener == config.inter_broker_listener_name)
    # ctx.registered records the broker epoch (again after a session expiry).
    await nursery.start(
        partial(
            maintain_registration,
            on_registered=ctx.registered,
            offline_partitions=lambda: ctx.replica_manager.offline,
            endpoints=endpoints if config.listeners else (),
        ),
        zk,
        config.broker_id,
        inter_broker.host,
        inter_broker.port,
        config.broker_rack,
    )
    ctx.controller = await nursery.start(
        partial(
            _controller_candidate,
            candidacy,
            zk,
            config.broker_id,
            ControllerSettings.of(config),
            security=ctx.control_plane_security,
            listener_name=config.control_plane_listener_name,
        )
    )
    if config.log_cleaner_enable:
        await nursery.start(LogCleaner(ctx, log_manager).run)
    nursery.start_soon(_housekeeping, ctx, log_manager)
    if config.metrics_listener:
        try:
            await nursery.start(_serve_http, ctx, server)
        except OSError as exc:
            raise StartupError(
                f"cannot listen on metrics.listener={config.metrics_listener}: "
                f"{exc.strerror or exc}"
            ) from exc


async def _serve_http(
    ctx: BrokerContext,
    server: BrokerServer,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The metrics listener: /metrics, the status page, its /api/cluster and /api/history
    (sampled by its own timer while the listener runs)."""
    # Imported here: a broker without the listener never loads starlette or hypercorn.
    from broker.cluster_view import ClusterView
    from broker.core.status_history import StatusHistory
    from broker.history_sampler import sample_history
    from broker.http_auth import HttpAccess
    from broker.http_listener import HttpListener, build_app
    from broker.metrics import new_registry

    config = ctx.config
    assert config.metrics_listener is not None
    host, port = parse_metrics_listener(config.metrics_listener)
    tls = None
    if metrics_listener_uses_tls(config.metrics_listener):
        try:
            tls = https_context(config)
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(
                f"cannot use ssl.keystore.location={config.ssl_keystore_location} for "
                f"metrics.listener={config.metrics_listener}: {exc}"
            ) from exc
    basic = config.metrics_listener_authentication_method == "basic"
    registry, collector = new_registry(ctx, server)
    view = ClusterView(ctx)
    collector.group_lag = view.group_lag
    history = StatusHistory()
    app = build_app(registry, view, HttpAccess(ctx) if basic else None, history)
    listener = HttpListener(app, config, host, port, tls)
    collector.http = listener
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(listener.run)
            nursery.start_soon(sample_history, view, history)
            task_status.started(listener.port)
    finally:
        await view.aclose()


async def _controller_candidate(
    scope: trio.CancelScope,
    *args: Any,
    task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED,
    **kwargs: Any,
) -> None:
    with scope:
        await run_controller(*args, task_status=task_status, **kwargs)


async def _wait_for_signal(
    signals: AsyncIterator[int],
    stopping: trio.Event,
    starting: trio.CancelScope,
    log: structlog.typing.FilteringBoundLogger,
) -> None:
    async for signum in signals:
        log.info("shutting down", signal=signal.Signals(signum).name)
        stopping.set()
        starting.cancel()  # no effect once started
        return


async def _store_own_login(config: BrokerConfig, zk: ZkClient) -> None:
    """This broker's inter-broker user (sasl.jaas.config) gets SCRAM credentials in
    /config/users if it has none, so brokers can log in to each other from their first start
    (Kafka asks the operator to create them beforehand). Stored credentials that the
    configured password does not match stop the start-up: the other brokers would refuse it."""
    login = config.inter_broker_login
    assert login is not None
    for _ in range(3):  # another broker may be storing the same user at the same moment
        stored = await zk.run(get_entity_config(USERS, login.username))
        entries = dict(stored.config)
        for mechanism in SCRAM_MECHANISMS:
            if mechanism not in entries:
                entries[mechanism] = make_credential(mechanism, login.password).encode()
            elif not password_matches(
                mechanism, ScramCredential.decode(entries[mechanism]), login.password
            ):
                raise StartupError(
                    f"the stored {mechanism} credential of user {login.username} does not match "
                    "the password in sasl.jaas.config (change one of them: "
                    "`highwater users add` or the broker's config)"
                )
        if entries == stored.config:
            return
        try:
            await zk.run(set_entity_config(USERS, login.username, entries, stored.version))
            return
        except ConfigChangedError:
            continue
    raise StartupError(f"could not store the credentials of user {login.username}")


def _served_listeners(config: BrokerConfig) -> tuple[ServedListener, ...]:
    """The listeners with their TLS context and SASL mechanisms; a TLS file that cannot be
    read is a StartupError naming the setting."""
    context = None
    if any(x.security_protocol.uses_tls for x in config.all_listeners()):
        try:
            context = server_context(config)
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(
                f"cannot load the TLS keystore or truststore (ssl.keystore.location "
                f"{config.ssl_keystore_location}, ssl.truststore.location "
                f"{config.ssl_truststore_location}): {exc}"
            ) from exc
    served = []
    for x in config.all_listeners():
        mechanisms = tuple(
            m
            for m in config.sasl_enabled_mechanisms
            if m != "PLAIN" or x.security_protocol.uses_tls  # no cleartext passwords
        )
        served.append(
            ServedListener(
                x.name,
                x.security_protocol,
                x.host,
                x.port,
                context if x.security_protocol.uses_tls else None,
                mechanisms if x.security_protocol.uses_sasl else (),
                WIRES[x.wire],
                tuple((m, ms) for name, m, ms in config.listener_max_reauth_ms if name == x.name),
            )
        )
    return tuple(served)


def _connection_limits(config: BrokerConfig) -> ConnectionLimits:
    """The connection limits of the config but max.connections (`_connection_limit`); the
    host names of max.connections.per.ip.overrides resolved once, here, as Kafka does."""
    per_ip: dict[str, int] = {}
    for host, count in parse_per_ip_overrides(config.max_connections_per_ip_overrides).items():
        try:
            addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
        except OSError as exc:
            raise StartupError(
                f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}"
            ) from exc
        per_ip.update(dict.fromkeys(addresses, count))
    return ConnectionLimits(
        listener_max_connections=dict(config.listener_max_connections),
        max_connections_per_ip=config.max_connections_per_ip,
        max_connections_per_ip_overrides=per_ip,
        max_connection_creation_rate=config.max_connection_creation_rate,
        inter_broker_listener=config.inter_broker_listener_name,
    )


# Descriptors kept back from client connections: segments and indexes, ZooKeeper, fetchers.
_RESERVED_FILE_DESCRIPTORS = 256


def _connection_limit(max_connections: int, log: structlog.typing.FilteringBoundLogger) -> int:
    """Raise the open-file limit to its hard maximum (as Kafka's docs ask of operators), then
    keep max.connections below it: idle sockets must never leave the broker without a
    descriptor for its own files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, _MAX_OPEN_FILES)
    if wanted > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit", error=str(exc))
    limit = max(1, min(max_connections, soft - _RESERVED_FILE_DESCRIPTORS))
    if limit < max_connections:
        log.warning(
            "max.connections lowered to fit the open-file limit",
            max_connections=limit,
            open_file_limit=soft,
        )
    return limit


_MAX_OPEN_FILES = 1 << 20


async def _housekeeping(ctx: BrokerContext, log_manager: LogManager) -> None:
    """Kafka's scheduler: retention, time-based flushes and checkpoints, each on its interval.
    Intervals run on trio's (monotonic) clock: a wall clock stepped back must not stall
    the checkpoints for as long as the step. The tasks get the wall clock, which they
    compare with stored times (segments, record timestamps), except the flush.ms timer."""
    schedule = HousekeepingSchedule.start(ctx.housekeeping_intervals_ms, round(clock.now_ms()))
    log = structlog.get_logger("highwater.housekeeping")
    while True:
        await trio.sleep_until(schedule.next_due_ms() / 1000)
        now_ms = round(clock.now_ms())
        for task in schedule.take_due(now_ms):
            try:
                removed = perform(
                    task,
                    log_manager,
                    ctx.replica_manager,
                    wall_ms=wall_clock_ms(),
                    monotonic_ms=now_ms,
                )
            except OSError as exc:
                # E.g. EMFILE while clients hold every descriptor: skip this round, try again
                # at the next interval; the broker keeps serving.
                log.warning("housekeeping failed; will retry", task=task.name, error=str(exc))
                continue
            if removed and task is HousekeepingTask.RETENTION:
                log.info("retention deleted segments", segments=removed)
            elif removed and task is HousekeepingTask.PRODUCER_EXPIRY:
                log.info("expired idle producer ids", producers=removed)
