"""The API table: Kafka's api key, request and response schemas, and supported versions."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from protocol.errors import UnsupportedVersionError
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.api_versions import ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

__all__ = ["APIS", "ApiKey", "ApiSpec", "api_spec", "supported_versions"]


class ApiKey(enum.IntEnum):
    """Kafka's api keys, for the APIs Highwater speaks."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: ApiKey
    request: type
    response: type
    min_version: int
    max_version: int

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise UnsupportedVersionError(
                f"{self.key.name} v{version} not supported "
                f"(supported: v{self.min_version}..v{self.max_version})"
            )


def _spec(key: ApiKey, request: type, response: type, max_version: int = 0) -> ApiSpec:
    return ApiSpec(key, request, response, 0, max_version)


APIS: Final[dict[int, ApiSpec]] = {
    s.key: s
    for s in (
        _spec(ApiKey.PRODUCE, ProduceRequest, ProduceResponse),
        _spec(ApiKey.FETCH, FetchRequest, FetchResponse),
        _spec(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse),
        _spec(ApiKey.METADATA, MetadataRequest, MetadataResponse, max_version=1),
        _spec(ApiKey.LEADER_AND_ISR, LeaderAndIsrRequest, LeaderAndIsrResponse, max_version=1),
        _spec(ApiKey.STOP_REPLICA, StopReplicaRequest, StopReplicaResponse),
        _spec(ApiKey.UPDATE_METADATA, UpdateMetadataRequest, UpdateMetadataResponse),
        _spec(ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest, ControlledShutdownResponse),
        _spec(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse),
        _spec(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse),
        _spec(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse),
        _spec(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse),
        _spec(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OffsetForLeaderEpochRequest,
            OffsetForLeaderEpochResponse,
            max_version=1,
        ),
        _spec(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse),
        _spec(ApiKey.ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse),
        _spec(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
            max_version=1,
        ),
        _spec(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
        ),
    )
}


def api_spec(api_key: int) -> ApiSpec:
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    return spec


def supported_versions() -> tuple[ApiVersionRange, ...]:
    """What an ApiVersions response lists."""
    return tuple(ApiVersionRange(s.key, s.min_version, s.max_version) for s in APIS.values())
