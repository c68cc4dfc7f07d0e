"""The admin client: topics (create, delete, list, add partitions), the cluster, leader
elections and partition reassignments; topic descriptions with offsets come from
admin_describe.py, configs (describe, alter) from admin_configs.py and consumer groups from
admin_groups.py.

Requests that only the controller can answer (ElectLeaders, reassignments) go to it, asking
again once after NOT_CONTROLLER; CreateTopics, DeleteTopics and CreatePartitions go to it when
known (any broker accepts them), and so do IncrementalAlterConfigs and DescribeConfigs, except
that a broker's own configs are asked of that broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

from client.admin_configs import (
    AlterConfigOp,
    ConfigAdmin,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
)
from client.admin_describe import (
    DEBUG_REPLICA_ID,
    DESCRIBE_OFFSETS_TIMEOUT_MS,
    PartitionDescription,
    TopicDescribeAdmin,
    TopicDescription,
)
from client.admin_groups import (
    GroupAdmin,
    GroupDescription,
    GroupListing,
    GroupOffset,
    ListGroupsResult,
    MemberDescription,
)
from client.errors import HighwaterClientError, error_for_code
from client.metadata import BrokerInfo, ClusterMetadata
from client.network import BrokerConnectionError
from client.security import ClientSecurity
from client.settings import default_int, default_str
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    TopicPartitions,
)
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

__all__ = [
    "DEBUG_REPLICA_ID",
    "DESCRIBE_OFFSETS_TIMEOUT_MS",
    "Admin",
    "AlterConfigOp",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "ElectionResult",
    "GroupDescription",
    "GroupListing",
    "GroupOffset",
    "ListGroupsResult",
    "MemberDescription",
    "OngoingReassignment",
    "PartitionDescription",
    "TopicDescription",
]

_CLIENT_ID: Final = default_str("admin", "client.id")
_REQUEST_TIMEOUT_MS: Final = default_int("admin", "request.timeout.ms")
_RETRY_BACKOFF_MS: Final = default_int("admin", "retry.backoff.ms")


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition reassignment in progress: the current replicas (original + target),
    those being added and those being removed."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's outcome of elect_leaders: NONE (elected), ELECTION_NOT_NEEDED,
    PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ..."""

    topic: str
    partition: int
    error_code: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]


class Admin(TopicDescribeAdmin, GroupAdmin, ConfigAdmin):
    """`async with Admin(bootstrap) as admin: await admin.create_topic("t", 6, 1)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = _CLIENT_ID,
        security: ClientSecurity | Mapping[str, str] | None = None,
        request_timeout_ms: int = _REQUEST_TIMEOUT_MS,
        retry_backoff_ms: int = _RETRY_BACKOFF_MS,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            security=security,
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

    async def create_partitions(
        self, name: str, total_partitions: int, *, timeout_ms: int | None = None
    ) -> None:
        """Grow topic `name` to `total_partitions` partitions (never fewer); waits until they
        have leaders. Raises HighwaterClientError named INVALID_PARTITIONS,
        UNKNOWN_TOPIC_OR_PARTITION..."""
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        request = CreatePartitionsRequest(
            (CreatePartitionsTopic(name, total_partitions),), timeout_ms=timeout
        )
        response: CreatePartitionsResponse = await self._to_controller(request, timeout)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise error_for_code(
                    result.error_code, f"add partitions to {result.name!r}", result.error_message
                )
        self.metadata.request_update()

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[tuple[str, int]] | None,
        *,
        timeout_ms: int | None = None,
    ) -> list[ElectionResult]:
        """Kafka's Admin.electLeaders: preferred (or unclean) elections for `partitions` (None:
        every partition); one result per partition, sorted. Raises HighwaterClientError when
        the controller refuses the whole request."""
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(set(partitions or ())):
            by_topic.setdefault(topic, []).append(partition)
        request = ElectLeadersRequest(
            int(election_type),
            None
            if partitions is None
            else tuple(TopicPartitions(t, tuple(ps)) for t, ps in by_topic.items()),
            timeout,
        )
        response: ElectLeadersResponse = await self._to_active_controller(request, timeout)
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            await self.metadata.refresh()
            response = await self._to_active_controller(request, timeout)
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, "elect leaders")
        self.metadata.request_update()
        return sorted(
            (
                ElectionResult(t.topic, p.partition_id, ErrorCode(p.error_code), p.error_message)
                for t in response.replica_election_results
                for p in t.partition_result
            ),
            key=lambda r: (r.topic, r.partition),
        )

    async def alter_partition_reassignments(
        self,
        targets: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
        throttle_bytes_per_sec: int | None = None,
    ) -> list[ElectionResult]:
        """Kafka's Admin.alterPartitionReassignments: per partition the target replicas, or
        None to cancel; one result per partition (NONE: started or cancelled), sorted.
        `throttle_bytes_per_sec` caps how fast the adding replicas of the moves started here
        copy (per broker). Raises HighwaterClientError when the controller refuses the whole
        request."""
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[ReassignablePartition]] = {}
        for (topic, partition), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append(
                ReassignablePartition(partition, None if replicas is None else tuple(replicas))
            )
        request = AlterPartitionReassignmentsRequest(
            timeout,
            tuple(ReassignableTopic(t, tuple(ps)) for t, ps in by_topic.items()),
            replication_throttle_bytes_per_sec=throttle_bytes_per_sec or -1,
        )
        response: AlterPartitionReassignmentsResponse = await self._to_controller_retrying(
            request, timeout
        )
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, "alter partition reassignments")
        self.metadata.request_update()
        return sorted(
            (
                ElectionResult(t.name, p.partition_index, ErrorCode(p.error_code), p.error_message)
                for t in response.responses
                for p in t.partitions
            ),
            key=lambda r: (r.topic, r.partition),
        )

    async def list_partition_reassignments(self) -> list[OngoingReassignment]:
        """Kafka's Admin.listPartitionReassignments: every reassignment in progress."""
        request = ListPartitionReassignmentsRequest(self.request_timeout_ms)
        response: ListPartitionReassignmentsResponse = await self._to_controller_retrying(
            request, self.request_timeout_ms
        )
        if response.error_code != ErrorCode.NONE:
            raise error_for_code(response.error_code, "list partition reassignments")
        return [
            OngoingReassignment(
                t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas
            )
            for t in response.topics
            for p in t.partitions
        ]

    async def _to_controller_retrying(self, request: object, timeout_ms: int) -> Any:
        """To the controller; on NOT_CONTROLLER refresh the metadata and ask once more."""
        response = await self._to_active_controller(request, timeout_ms)
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            await self.metadata.refresh()
            response = await self._to_active_controller(request, timeout_ms)
        return response

    async def _to_active_controller(self, request: object, timeout_ms: int) -> Any:
        """Send to the controller the metadata names (refreshing it first if none)."""
        if self.metadata.controller_id not in self.metadata.brokers:
            await self.metadata.refresh()
        controller = self.metadata.controller_id
        if controller not in self.metadata.brokers:
            raise HighwaterClientError(
                "NOT_CONTROLLER: the cluster has no controller right now", ErrorCode.NOT_CONTROLLER
            )
        try:
            return await self.metadata.request(
                controller, request, timeout_ms=timeout_ms + self.request_timeout_ms
            )
        except BrokerConnectionError as exc:
            self.metadata.request_update()
            raise HighwaterClientError(
                f"NETWORK_EXCEPTION: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from exc

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

    async def send(self, request: object) -> Any:
        """Send a request that any broker answers (the controller preferred); its response.
        For the admin APIs without a method here (client/security_admin.py uses it)."""
        return await self._to_controller(request, self.request_timeout_ms)

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
