"""Config changes reach every broker within seconds (Kafka's DynamicConfigManager with its
ZkNodeChangeNotificationListener).

A trio task watches `/config/changes`. For each notification after the last one handled it
reads the entity it names (a topic's `/config/topics/<t>`, or the cluster-wide defaults
`/config/brokers/<default>`), then lets broker.config.dynamic_update decide what changes on
which open log and applies it; logs whose retention was lowered are checked at once. After a
(re)connection, at start and after a failed round it reads everything instead: the defaults
and the configs of every topic with a log here. LeaderAndIsr reads topic configs too; the two
take `BrokerContext.config_lock` in turn, so the later ZooKeeper read always applies last.
Notifications older than 15 minutes are purged, a bounded number per round. Users whose SCRAM
credentials were deleted or changed are handed to `on_credentials_revoked` (the server closes
their open connections).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import structlog
import trio

from broker.client_quotas import stored_quotas
from broker.config.config_admin import static_defaults
from broker.config.dynamic_update import (
    BrokerDefaults,
    apply_config_update,
    entities_to_read,
    open_log_configs,
    plan_config_update,
    with_dynamic_defaults,
)
from broker.context import BrokerContext, wall_clock_ms
from broker.core.sasl_session import revoked_users
from broker.core.scram import SCRAM_MECHANISMS, ScramCredential
from controller import zk_data
from controller.zk_client import ZkClient, run_each
from controller.zk_configs import (
    BROKERS,
    CLIENTS,
    CLIENTS_OF_USER,
    TOPICS,
    USERS,
    get_entity_config,
    list_users,
    purge_expired_changes,
    read_config_changes,
    read_quota_entities,
)
from controller.zk_types import SessionEvent, SessionState, WatchEvent, ZkError, ZkEvent

__all__ = ["ConfigChangeListener"]

_BACKOFF_S = (0.5, 10.0)


class ConfigChangeListener:
    def __init__(
        self,
        ctx: BrokerContext,
        zk: ZkClient,
        *,
        on_credentials_revoked: Callable[[frozenset[str]], None] | None = None,
    ) -> None:
        self._ctx = ctx
        self._zk = zk
        self._on_credentials_revoked = on_credentials_revoked
        self._static = static_defaults(ctx.config)
        self.defaults: BrokerDefaults = self._static  # in force here
        self.dynamic_defaults: dict[str, str] = {}  # as stored
        self._last = -1  # the last notification handled
        # Every stored client-quota entity's configs, by (USERS or CLIENTS, stored name).
        self._quota_configs: dict[tuple[str, str], dict[str, str]] = {}
        self._log = structlog.get_logger("highwater.config_changes")

    async def run(
        self, *, task_status: trio.TaskStatus[ConfigChangeListener] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Read everything once (retrying until it works: logs must not take a LeaderAndIsr
        with the wrong defaults), report started, then follow the notifications."""
        events = self._zk.subscribe()
        with events:
            backoff_s = _BACKOFF_S[0]
            while not await self._round(everything=True):
                await trio.sleep(backoff_s)
                backoff_s = min(2 * backoff_s, _BACKOFF_S[1])
            task_status.started(self)
            await self._follow(events)

    async def _follow(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        retry_at = math.inf  # a failed round is tried again then, reading everything
        backoff_s = _BACKOFF_S[0]
        everything = False
        while True:
            with trio.move_on_at(retry_at):
                try:
                    event = await events.receive()
                except trio.EndOfChannel:
                    return  # the ZkClient was closed
                match event:
                    case WatchEvent(path=zk_data.CONFIG_CHANGES_PATH):
                        pass
                    case SessionEvent(state=SessionState.CONNECTED):
                        everything = True  # watches were dropped while disconnected
                    case _:
                        continue
            if await self._round(everything=everything or retry_at < math.inf):
                retry_at, backoff_s, everything = math.inf, _BACKOFF_S[0], False
            else:
                retry_at = trio.current_time() + backoff_s
                backoff_s = min(2 * backoff_s, _BACKOFF_S[1])

    async def _round(self, *, everything: bool) -> bool:
        """One round under the config lock; False (logged) if ZooKeeper failed us."""
        try:
            async with self._ctx.config_lock:
                await self._apply_changes(everything)
        except (ZkError, zk_data.ZkDataError, OSError) as exc:
            # OSError: a retention pass that could not delete (EMFILE...): try again later.
            self._log.warning("config changes not applied; will retry", error=repr(exc))
            return False
        return True

    async def _apply_changes(self, everything: bool) -> None:
        zk, state = self._zk, self._ctx.state
        # Re-arm the watch first: a change after this read is notified again.
        changes = await zk.run(read_config_changes(self._last, entities=not everything))
        for child in changes.malformed:
            self._log.warning("malformed config change notification ignored", node=child)
        hosted = {tp.topic for tp in state.replica_manager.log_manager.logs}
        to_read = entities_to_read(changes.entities, hosted, everything=everything)
        if to_read.defaults:
            try:
                stored = await zk.run(get_entity_config(BROKERS, zk_data.DEFAULT_BROKER_ENTITY))
            except zk_data.ZkDataError as exc:  # written by hand? keep what is in force
                self._log.warning("dynamic broker defaults unreadable", error=str(exc))
            else:
                self.defaults, skipped = with_dynamic_defaults(self._static, stored.config)
                self.dynamic_defaults = dict(stored.config)
                for key, why in skipped.items():
                    self._log.warning("dynamic broker default ignored", key=key, reason=why)
        topics = set(to_read.topics)
        found, unreadable = await run_each(
            zk,
            {topic: get_entity_config(TOPICS, topic) for topic in topics},
            tolerate=(zk_data.ZkDataError,),
        )
        topic_configs = {topic: entity.config for topic, entity in found.items()}
        for topic, error in sorted(unreadable.items()):
            self._log.warning("topic configs unreadable", topic=topic, error=str(error))
        topics = topics - unreadable.keys()
        users = (
            await zk.run(list_users())
            if everything
            else [
                name
                for kind, name in changes.entities
                if kind == USERS and CLIENTS_OF_USER not in name
            ]
        )
        await self._read_credentials(users, everything)
        await self._read_quotas(
            [(kind, name) for kind, name in changes.entities if kind in (USERS, CLIENTS)],
            everything,
        )
        update = plan_config_update(self.defaults, topic_configs, open_log_configs(state, topics))
        deleted = apply_config_update(state, update, wall_clock_ms())
        for topic, problem in update.problems.items():
            self._log.warning("topic configs invalid; unchanged", topic=topic, error=problem)
        if changes.entities or update.changed:
            self._log.info(
                "config changes applied",
                entities=[f"{kind}/{name}" for kind, name in changes.entities],
                logs_changed=len(update.changed),
                retention_checked=len(update.retention_now),
                segments_deleted=deleted,
            )
        self._last = changes.last
        purged = await zk.run(purge_expired_changes(changes.children, wall_clock_ms()))
        if purged:
            self._log.info("expired config change notifications purged", count=purged)

    async def _read_quotas(self, named: list[tuple[str, str]], everything: bool) -> None:
        """The client quotas of the `named` entities (every one when `everything`) into the
        broker's quota managers (Kafka's ClientQuotaManager.updateQuota)."""
        if everything:
            self._quota_configs = await self._zk.run(read_quota_entities())
        elif named:
            found, unreadable = await run_each(
                self._zk,
                {entity: get_entity_config(*entity) for entity in named},
                tolerate=(zk_data.ZkDataError,),
            )
            for entity in named:
                if entity in unreadable:
                    self._log.warning("client quotas unreadable", entity="/".join(entity))
                elif found[entity].version < 0:
                    self._quota_configs.pop(entity, None)
                else:
                    self._quota_configs[entity] = dict(found[entity].config)
        else:
            return
        quotas, problems = stored_quotas(self._quota_configs)
        for path, bad in sorted(problems.items()):
            self._log.warning("client quota values ignored", entity=path, problems=bad)
        self._ctx.client_quotas.update(quotas)
        if named:
            self._log.info("client quotas changed", entities=["/".join(e) for e in named])

    async def _read_credentials(self, users: list[str], everything: bool) -> None:
        """The SCRAM credentials of `users` into the broker's cache (Kafka's CredentialCache),
        every user's when `everything`: those no longer stored are forgotten."""
        credentials = dict(self._ctx.credentials) if not everything else {}
        found, unreadable = await run_each(
            self._zk,
            {user: get_entity_config(USERS, user) for user in users},
            tolerate=(zk_data.ZkDataError,),
        )
        for user, error in sorted(unreadable.items()):
            self._log.warning("user credentials unreadable", user=user, error=str(error))
        for user in users:
            stored = found[user].config if user in found else {}
            for mechanism in SCRAM_MECHANISMS:
                credentials.pop((user, mechanism), None)
                if mechanism not in stored:
                    continue
                try:
                    credentials[(user, mechanism)] = ScramCredential.decode(stored[mechanism])
                except ValueError as exc:
                    self._log.warning(
                        "SCRAM credential unreadable",
                        user=user,
                        mechanism=mechanism,
                        error=str(exc),
                    )
        if users and not everything:
            self._log.info("user credentials changed", users=users)
        revoked = revoked_users(self._ctx.credentials, credentials)
        self._ctx.credentials = credentials
        if revoked and self._on_credentials_revoked is not None:
            self._log.info("user credentials deleted or changed", users=sorted(revoked))
            self._on_credentials_revoked(revoked)
