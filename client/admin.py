"""The admin client: create, delete, list and describe topics; describe the cluster.

CreateTopics/DeleteTopics go to the controller when the metadata names one (any broker accepts
them here: it writes ZooKeeper and waits until its metadata shows the change), else to any
broker. describe_topics adds each partition's high watermark (ListOffsets latest, replica id
-1) and log end offset (ListOffsets latest with the debug replica id -2) from its leader; a
partition without a leader, or whose leader did not answer, shows None for both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

from client.errors import HighwaterClientError, UnknownTopicError, error_for_code
from client.metadata import BrokerInfo, ClusterMetadata, list_offsets
from client.network import BrokerConnectionError
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.list_offsets import LATEST_TIMESTAMP

__all__ = [
    "DEBUG_REPLICA_ID",
    "Admin",
    "ClusterDescription",
    "PartitionDescription",
    "TopicDescription",
]

# ListOffsets from this replica id answers "latest" with the log end offset (a debug id).
DEBUG_REPLICA_ID: Final = -2


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    high_watermark: int | None
    log_end_offset: int | None


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]


class Admin:
    """`async with Admin(bootstrap) as admin: await admin.create_topic("t", 6, 1)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "highwater-admin",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.metadata.aclose()

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> None:
        """Create a topic (-1: the broker's num.partitions / default.replication.factor).
        Raises HighwaterClientError named TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR..."""
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        request = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name,
                    partitions,
                    replication_factor,
                    configs=tuple(
                        CreatableTopicConfig(k, v) for k, v in sorted((config or {}).items())
                    ),
                ),
            ),
            timeout_ms=timeout,
            validate_only=validate_only,
        )
        response: CreateTopicsResponse = await self._to_controller(request, timeout)
        for result in response.topics:
            if result.error_code != ErrorCode.NONE:
                raise error_for_code(
                    result.error_code, f"create topic {result.name!r}", result.error_message
                )
        self.metadata.request_update()

    async def delete_topic(self, name: str, *, timeout_ms: int | None = None) -> None:
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        response: DeleteTopicsResponse = await self._to_controller(
            DeleteTopicsRequest((name,), timeout), timeout
        )
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise error_for_code(
                    result.error_code, f"delete topic {result.name!r}", result.error_message
                )
        self.metadata.request_update()

    async def list_topics(self) -> list[str]:
        await self.metadata.refresh(all_topics=True)
        return list(self.metadata.topics)

    async def describe_cluster(self) -> ClusterDescription:
        await self.metadata.refresh(all_topics=True)
        m = self.metadata
        return ClusterDescription(
            m.cluster_id,
            m.controller_id,
            m.controller_epoch,
            tuple(m.brokers[b] for b in sorted(m.brokers)),
        )

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        """Topics (all when names is None) with per-partition leader, epoch, replicas, ISR,
        high watermark and log end offset. UnknownTopicError if a named topic does not exist."""
        wanted = None if names is None else list(names)
        if wanted is None:
            await self.metadata.refresh(all_topics=True)
            wanted = list(self.metadata.topics)
        else:
            await self.metadata.refresh(wanted)
            for name in wanted:
                if self.metadata.partitions_for(name) is None:
                    code = self.metadata.topic_error(name)
                    if code and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise error_for_code(code, f"describe topic {name!r}")
                    raise UnknownTopicError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name!r}")
        tps = [(t, p) for t in wanted for p in self.metadata.partitions_for(t) or ()]
        latest = dict.fromkeys(tps, LATEST_TIMESTAMP)
        timeout = self.request_timeout_ms
        hws = await list_offsets(self.metadata, latest, timeout_ms=timeout, partial=True)
        leos = await list_offsets(
            self.metadata, latest, replica_id=DEBUG_REPLICA_ID, timeout_ms=timeout, partial=True
        )
        out = []
        for name in wanted:
            parts = []
            for p in self.metadata.partitions_for(name) or ():
                info = self.metadata.partition_info(name, p)
                assert info is not None
                hw = hws.get((name, p))
                leo = leos.get((name, p))
                parts.append(
                    PartitionDescription(
                        p,
                        info.leader,
                        info.leader_epoch,
                        info.replicas,
                        info.isr,
                        info.offline_replicas,
                        hw[0] if hw is not None else None,
                        leo[0] if leo is not None else None,
                    )
                )
            out.append(TopicDescription(name, tuple(parts)))
        return out

    async def _to_controller(self, request: object, timeout_ms: int) -> Any:
        """Send to the controller (or any broker); network timeout = the request's + margin."""
        if self.metadata.controller_id < 0:
            await self.metadata.refresh()
        network_timeout = timeout_ms + self.request_timeout_ms
        controller = self.metadata.controller_id
        if controller in self.metadata.brokers:
            try:
                return await self.metadata.request(controller, request, timeout_ms=network_timeout)
            except BrokerConnectionError:
                self.metadata.request_update()
        conn = await self.metadata.any_connection()
        try:
            return await conn.request(request, timeout_ms=network_timeout)
        except BrokerConnectionError as exc:
            raise HighwaterClientError(
                f"NETWORK_EXCEPTION: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from exc
