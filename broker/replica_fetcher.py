"""Followers' fetching, trio shell: one task and one connection per leader, each driving a
`broker.core.follower.Follower` (what to ask, what to do with the answer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import structlog
import trio

from broker.assembly import fetcher_settings
from broker.core.controller_requests import FollowerChange
from broker.core.follower import FetchState, Follower, FollowerSet
from broker.core.replication_quota import ReplicationQuota
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.errors import HighwaterError
from protocol.messages.common import BrokerEndpoint
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["ReplicaFetcherManager"]


class ReplicaFetcherManager:
    """Runs one fetcher task per leader that `FollowerSet` says we follow."""

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self.followers = FollowerSet(ctx.state, fetcher_settings(ctx.config))
        self._nursery: trio.Nursery | None = None
        self._fetchers: dict[BrokerEndpoint, _ReplicaFetcher] = {}

    @property
    def throttle_quota(self) -> ReplicationQuota:
        """One quota for all throttled partitions of this broker, across its fetchers."""
        return self.followers.quota

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def apply(self, change: FollowerChange) -> None:
        if self._nursery is None:
            return
        update = self.followers.apply(change)
        for follower in update.stopped:
            self._fetchers.pop(follower.leader).stop()
        if update.started is not None:
            fetcher = _ReplicaFetcher(self._ctx, update.started)
            self._fetchers[update.started.leader] = fetcher
            self._nursery.start_soon(fetcher.run)
        if update.woken is not None:
            self._fetchers[update.woken.leader].changed()

    def followed(self) -> Iterator[tuple[TopicPartition, FetchState]]:
        """Every partition followed, with its fetch state, by leader then partition."""
        for follower in self.followers.by_leader.values():
            yield from sorted(follower.partitions.items())

    def fetching_from(self) -> dict[TopicPartition, int]:
        """tp -> the leader's broker id, for every partition being followed (for tests/logs)."""
        return {
            tp: leader.node_id
            for leader, follower in self.followers.by_leader.items()
            for tp in follower.partitions
        }


class _ReplicaFetcher:
    def __init__(self, ctx: BrokerContext, follower: Follower) -> None:
        self._ctx = ctx
        self.follower = follower
        self._changed = trio.Event()
        self._scope = trio.CancelScope()
        self._connection: BrokerConnection | None = None
        self._log = structlog.get_logger("highwater.fetcher").bind(leader=follower.leader.node_id)

    def changed(self) -> None:
        self._changed.set()

    def stop(self) -> None:
        self._scope.cancel()

    async def run(self) -> None:
        backoff_s = self._ctx.config.replica_fetch_backoff_ms / 1000
        with self._scope:
            try:
                while True:
                    try:
                        await self._run_once()
                    except (BrokerConnectionError, HighwaterError) as exc:
                        self._log.info("fetcher connection failed", error=str(exc))
                        self.follower.request_failed()
                        self._close()
                        await trio.sleep(backoff_s)
            finally:
                self._close()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close_now()
            self._connection = None

    async def _run_once(self) -> None:
        sent = self.follower.poll(self._ctx.now_ms())
        if sent is None:  # nothing ready: wait for a change, or for a back-off to end
            self._changed = trio.Event()
            wake_ms = self.follower.next_ready_ms()
            delay_s = float("inf") if wake_ms is None else (wake_ms - self._ctx.now_ms()) / 1000
            with trio.move_on_after(max(delay_s, 0.001)):
                await self._changed.wait()
            return
        if self._connection is None or self._connection.broken:
            leader = self.follower.leader
            self._connection = await connect(
                leader.host,
                leader.port,
                client_id=f"replica-fetcher-{self._ctx.broker_id}",
                timeout_ms=self._ctx.config.request_timeout_ms,
                security=self._ctx.inter_broker_security,
            )
        response = await self._connection.request(sent.request, timeout_ms=sent.timeout_ms)
        self.follower.on_response(sent, response, self._ctx.now_ms(), wall_ms=self._ctx.wall_ms())
