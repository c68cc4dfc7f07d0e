"""Followers' fetching, trio shell: one task and one connection per leader, each driving a
`broker.core.follower.Follower` (what to ask, what to do with the answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from broker.core.controller_requests import FollowerChange
from broker.core.follower import FetcherSettings, Follower
from broker.core.replication_quota import ReplicationQuota
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.errors import HighwaterError
from protocol.messages.common import BrokerEndpoint
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["ReplicaFetcherManager"]


class ReplicaFetcherManager:
    """Which partitions this broker follows, from whom; starts and stops fetchers."""

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        config = ctx.config
        self._settings = FetcherSettings(
            config.replica_fetch_max_bytes,
            config.replica_fetch_min_bytes,
            config.replica_fetch_wait_max_ms,
            config.replica_fetch_backoff_ms,
            config.request_timeout_ms,
        )
        self._nursery: trio.Nursery | None = None
        self._fetchers: dict[BrokerEndpoint, _ReplicaFetcher] = {}
        # One quota for all throttled partitions of this broker, across its fetchers.
        self.throttle_quota = ReplicationQuota()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def apply(self, change: FollowerChange) -> None:
        if change.leader is None:
            self.unfollow(change.tp)
        else:
            self.follow(change.tp, change.leader, change.leader_epoch)

    def follow(self, tp: TopicPartition, leader: BrokerEndpoint, leader_epoch: int) -> None:
        """Fetch `tp` from `leader` in `leader_epoch`, truncating first. Idempotent for the
        same leader and epoch (a repeated LeaderAndIsr must not restart truncation)."""
        current = self._fetchers.get(leader)
        if current is not None:
            state = current.follower.partitions.get(tp)
            if state is not None and state.leader_epoch == leader_epoch:
                return
        self.unfollow(tp)
        if self._nursery is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            follower = Follower(self._ctx.state, self._settings, leader, self.throttle_quota)
            fetcher = _ReplicaFetcher(self._ctx, follower)
            self._fetchers[leader] = fetcher
            self._nursery.start_soon(fetcher.run)
        fetcher.follower.add(tp, leader_epoch)
        fetcher.changed()

    def unfollow(self, tp: TopicPartition) -> None:
        for endpoint, fetcher in list(self._fetchers.items()):
            if tp in fetcher.follower.partitions:
                fetcher.follower.remove(tp)
                if not fetcher.follower.partitions:
                    fetcher.stop()
                    del self._fetchers[endpoint]

    def fetching_from(self) -> dict[TopicPartition, int]:
        """tp -> the leader's broker id, for every partition being followed (for tests/logs)."""
        return {
            tp: endpoint.node_id
            for endpoint, f in self._fetchers.items()
            for tp in f.follower.partitions
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
            )
        response = await self._connection.request(sent.request, timeout_ms=sent.timeout_ms)
        self.follower.on_response(sent, response, self._ctx.now_ms())
