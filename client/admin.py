"""The admin client: topics (create, delete, list, describe, add partitions), the cluster,
leader elections, partition reassignments, and configs (describe, alter); consumer groups
come from admin_groups.py.

Requests that only the controller can answer (ElectLeaders, reassignments) go to it, asking
again once after NOT_CONTROLLER; CreateTopics, DeleteTopics and CreatePartitions go to it when
known (any broker accepts them), and so do IncrementalAlterConfigs and DescribeConfigs, except
that a broker's own configs are asked of that broker. `describe_topics` shows each partition's
HW and every
replica's LEO (ListOffsets as a consumer, and with the debug replica id -2), one request per
broker and kind, each bounded by offsets_timeout_ms; a missing answer is None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import trio

from client.admin_groups import (
    GroupAdmin,
    GroupDescription,
    GroupListing,
    GroupOffset,
    ListGroupsResult,
    MemberDescription,
)
from client.errors import HighwaterClientError, UnknownTopicError, error_for_code
from client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo
from client.network import BrokerConnectionError
from client.security import ClientSecurity
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.common import ConfigResourceType
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
from protocol.messages.describe_configs import (
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    TopicPartitions,
)
from protocol.messages.fetch import CONSUMER_REPLICA_ID
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigOpType,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
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

# ListOffsets from this replica id answers "latest" with the log end offset (Kafka's debugging
# consumer id), from any broker hosting the partition, leader or follower.
DEBUG_REPLICA_ID: Final = -2
# How long describe_topics waits for one broker's offsets before showing them as unknown.
DESCRIBE_OFFSETS_TIMEOUT_MS: Final = 5_000

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    high_watermark: int | None  # what consumers can read up to, from the leader
    log_end_offset: int | None  # the leader's
    # Every replica's log end offset, in replica order (None: its broker did not say).
    replica_log_end_offsets: Mapping[int, int | None]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]


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
class ConfigResource:
    """Kafka's ConfigResource: a topic, a broker by id, or (BROKER, "") the cluster-wide
    dynamic broker defaults."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | None = None) -> ConfigResource:
        """Broker `broker_id`'s configs; None: the cluster-wide defaults."""
        return cls(ConfigResourceType.BROKER, "" if broker_id is None else str(broker_id))

    def __str__(self) -> str:
        if self.type == ConfigResourceType.TOPIC:
            return f"topic {self.name!r}"
        return f"broker {self.name}" if self.name else "the cluster-wide broker defaults"


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """Kafka's AlterConfigOp: SET `name` to `value`, or DELETE it (back to the default)."""

    name: str
    op: AlterConfigOpType = AlterConfigOpType.SET
    value: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs reports it: its value, where the value comes from, and
    (when asked for) every source it could come from, highest precedence first."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]


class Admin(GroupAdmin):
    """`async with Admin(bootstrap) as admin: await admin.create_topic("t", 6, 1)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "highwater-admin",
        security: ClientSecurity | Mapping[str, str] | None = None,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
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

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Kafka's Admin.incrementalAlterConfigs: per resource, SET or DELETE configs. Each
        resource succeeds or fails whole; the first failure is raised (HighwaterClientError
        named INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION..., with the broker's
        message naming the key). Every broker applies a change within seconds."""
        for target, resources in self._config_targets(changes).items():
            part = IncrementalAlterConfigsRequest(
                tuple(
                    AlterConfigsResource(
                        r.type,
                        r.name,
                        tuple(AlterableConfig(o.name, o.op, o.value) for o in changes[r]),
                    )
                    for r in resources
                ),
                validate_only,
            )
            response: IncrementalAlterConfigsResponse = await self._to_config_target(target, part)
            for result in response.responses:
                if result.error_code != ErrorCode.NONE:
                    resource = ConfigResource(
                        ConfigResourceType(result.resource_type), result.resource_name
                    )
                    raise error_for_code(
                        result.error_code, f"alter configs of {resource}", result.error_message
                    )

    async def alter_topic_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and delete (back to the broker default) configs of `topic`."""
        await self.incremental_alter_configs(
            {ConfigResource.topic(topic): _ops(set_configs, delete_configs)},
            validate_only=validate_only,
        )

    async def alter_broker_defaults(
        self,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and delete cluster-wide dynamic broker defaults (`log.retention.ms`, ...): they
        apply to every broker, over its server.properties, and to every topic without an
        override."""
        await self.incremental_alter_configs(
            {ConfigResource.broker(): _ops(set_configs, delete_configs)},
            validate_only=validate_only,
        )

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, list[ConfigEntry]]:
        """Kafka's Admin.describeConfigs: each resource's configs with their values and
        sources. A failed resource raises (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        wanted = list(dict.fromkeys(resources))
        out: dict[ConfigResource, list[ConfigEntry]] = {}
        for target, part in self._config_targets(dict.fromkeys(wanted)).items():
            request = DescribeConfigsRequest(
                tuple(DescribeConfigsResource(r.type, r.name) for r in part),
                include_synonyms,
                include_documentation,
            )
            response: DescribeConfigsResponse = await self._to_config_target(target, request)
            for result in response.results:
                resource = ConfigResource(
                    ConfigResourceType(result.resource_type), result.resource_name
                )
                if result.error_code != ErrorCode.NONE:
                    raise error_for_code(
                        result.error_code, f"describe configs of {resource}", result.error_message
                    )
                out[resource] = [
                    ConfigEntry(
                        c.name,
                        c.value,
                        _source(c.config_source),
                        c.read_only,
                        c.is_sensitive,
                        tuple(
                            ConfigSynonym(s.name, s.value, _source(s.source)) for s in c.synonyms
                        ),
                        c.documentation,
                    )
                    for c in result.configs
                ]
        return {r: out[r] for r in wanted if r in out}

    def _config_targets(
        self, resources: Mapping[ConfigResource, object]
    ) -> dict[int | None, list[ConfigResource]]:
        """Which broker to ask about what: a broker's own configs that broker (as Kafka's
        admin client), everything else the controller or any broker (None)."""
        targets: dict[int | None, list[ConfigResource]] = {}
        for resource in resources:
            named_broker = resource.type == ConfigResourceType.BROKER and resource.name.isdigit()
            targets.setdefault(int(resource.name) if named_broker else None, []).append(resource)
        return targets

    async def _to_config_target(self, target: int | None, request: object) -> Any:
        if target is None:
            return await self._to_controller(request, self.request_timeout_ms)
        if target not in self.metadata.brokers:
            await self.metadata.refresh()
        if target not in self.metadata.brokers:
            raise HighwaterClientError(
                f"BROKER_NOT_AVAILABLE: broker {target} is not in the cluster",
                ErrorCode.BROKER_NOT_AVAILABLE,
            )
        try:
            return await self.metadata.request(
                target, request, timeout_ms=2 * self.request_timeout_ms
            )
        except BrokerConnectionError as exc:
            self.metadata.request_update()
            raise HighwaterClientError(
                f"NETWORK_EXCEPTION: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from exc

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

    async def describe_topics(
        self,
        names: Iterable[str] | None = None,
        *,
        offsets_timeout_ms: int = DESCRIBE_OFFSETS_TIMEOUT_MS,
    ) -> list[TopicDescription]:
        """Topics (all when names is None) with per-partition leader, epoch, replicas, ISR,
        offline replicas, high watermark and each replica's log end offset.
        UnknownTopicError if a named topic does not exist."""
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
        infos = {
            name: [
                info
                for p in self.metadata.partitions_for(name) or ()
                if (info := self.metadata.partition_info(name, p)) is not None
            ]
            for name in wanted
        }
        hws, leos = await self._log_offsets(
            [info for parts in infos.values() for info in parts], offsets_timeout_ms
        )
        return [
            TopicDescription(name, tuple(_describe_partition(info, hws, leos) for info in parts))
            for name, parts in infos.items()
        ]

    async def _log_offsets(
        self, infos: Sequence[PartitionInfo], timeout_ms: int
    ) -> tuple[dict[TopicPartitionKey, int], dict[tuple[TopicPartitionKey, int], int]]:
        """(high watermark by partition, log end offset by (partition, replica)): ListOffsets
        latest to each leader as a consumer and to each live replica's broker with the debug
        id, concurrently; what does not come back within timeout_ms is left out."""
        leaders: dict[int, list[PartitionInfo]] = {}
        hosts: dict[int, list[PartitionInfo]] = {}
        for info in infos:
            if info.leader in self.metadata.brokers:
                leaders.setdefault(info.leader, []).append(info)
            for replica in info.replicas:
                if replica in self.metadata.brokers and replica not in info.offline_replicas:
                    hosts.setdefault(replica, []).append(info)
        hws: dict[TopicPartitionKey, int] = {}
        leos: dict[tuple[TopicPartitionKey, int], int] = {}

        async def high_watermarks(broker: int, parts: list[PartitionInfo]) -> None:
            hws.update(await self._latest_offsets(broker, parts, CONSUMER_REPLICA_ID, timeout_ms))

        async def log_end_offsets(broker: int, parts: list[PartitionInfo]) -> None:
            found = await self._latest_offsets(broker, parts, DEBUG_REPLICA_ID, timeout_ms)
            leos.update(((tp, broker), offset) for tp, offset in found.items())

        async with trio.open_nursery() as nursery:
            for broker, parts in leaders.items():
                nursery.start_soon(high_watermarks, broker, parts)
            for broker, parts in hosts.items():
                nursery.start_soon(log_end_offsets, broker, parts)
        return hws, leos

    async def _latest_offsets(
        self, broker: int, parts: Sequence[PartitionInfo], replica_id: int, timeout_ms: int
    ) -> dict[TopicPartitionKey, int]:
        """ListOffsets latest for `parts` from one broker: {} if it does not answer in time;
        partitions it answers with an error are left out. The consumer's request carries the
        leader epoch (a deposed leader is fenced); the debug one skips the check, as a
        follower may not have heard of the newest epoch yet."""
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for info in parts:
            epoch = info.leader_epoch if replica_id == CONSUMER_REPLICA_ID else -1
            topics.setdefault(info.topic, []).append(
                ListOffsetsPartition(info.partition, LATEST_TIMESTAMP, epoch)
            )
        request = ListOffsetsRequest(
            replica_id, tuple(ListOffsetsTopic(t, tuple(ps)) for t, ps in topics.items())
        )
        response: ListOffsetsResponse | None = None
        with trio.move_on_after(timeout_ms / 1000):  # connecting included
            try:
                response = await self.metadata.request(broker, request, timeout_ms=timeout_ms)
            except BrokerConnectionError:
                self.metadata.request_update()
        if response is None:
            return {}
        return {
            (t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }

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


def _ops(
    set_configs: Mapping[str, str] | None, delete_configs: Iterable[str]
) -> list[AlterConfigOp]:
    ops = [AlterConfigOp(k, AlterConfigOpType.SET, v) for k, v in (set_configs or {}).items()]
    return ops + [AlterConfigOp(k, AlterConfigOpType.DELETE) for k in delete_configs]


def _source(code: int) -> ConfigSource:
    try:
        return ConfigSource(code)
    except ValueError:
        return ConfigSource.UNKNOWN


def _describe_partition(
    info: PartitionInfo,
    hws: Mapping[TopicPartitionKey, int],
    leos: Mapping[tuple[TopicPartitionKey, int], int],
) -> PartitionDescription:
    tp = (info.topic, info.partition)
    return PartitionDescription(
        info.partition,
        info.leader,
        info.leader_epoch,
        info.replicas,
        info.isr,
        info.offline_replicas,
        hws.get(tp),
        leos.get((tp, info.leader)),
        {replica: leos.get((tp, replica)) for replica in info.replicas},
    )
