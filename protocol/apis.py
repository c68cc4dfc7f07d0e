"""The API table: Kafka's api key, request and response schemas, and supported versions.

A message module is imported the first time its API is used, not with this module: a client
process needs two or three of them (a Spark query's source runner, a CLI command),
and importing them all cost about 50 ms at every start.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from protocol.errors import UnsupportedVersionError
from protocol.messages.api_versions import ApiVersionRange

__all__ = ["APIS", "ApiKey", "ApiSpec", "api_key_of", "api_spec", "supported_versions"]


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
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


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


# api key -> (module under protocol.messages, class name prefix, max version); every API
# starts at version 0. The classes are `<prefix>Request` and `<prefix>Response`.
_TABLE: Final[dict[ApiKey, tuple[str, str, int]]] = {
    ApiKey.PRODUCE: ("produce", "Produce", 0),
    ApiKey.FETCH: ("fetch", "Fetch", 2),
    ApiKey.LIST_OFFSETS: ("list_offsets", "ListOffsets", 0),
    ApiKey.METADATA: ("metadata", "Metadata", 2),
    ApiKey.LEADER_AND_ISR: ("leader_and_isr", "LeaderAndIsr", 2),
    ApiKey.STOP_REPLICA: ("stop_replica", "StopReplica", 0),
    ApiKey.UPDATE_METADATA: ("update_metadata", "UpdateMetadata", 2),
    ApiKey.CONTROLLED_SHUTDOWN: ("controlled_shutdown", "ControlledShutdown", 0),
    ApiKey.OFFSET_COMMIT: ("offset_commit", "OffsetCommit", 0),
    ApiKey.OFFSET_FETCH: ("offset_fetch", "OffsetFetch", 0),
    ApiKey.FIND_COORDINATOR: ("find_coordinator", "FindCoordinator", 0),
    ApiKey.LIST_GROUPS: ("list_groups", "ListGroups", 0),
    ApiKey.SASL_HANDSHAKE: ("sasl_handshake", "SaslHandshake", 0),
    ApiKey.API_VERSIONS: ("api_versions", "ApiVersions", 0),
    ApiKey.CREATE_TOPICS: ("create_topics", "CreateTopics", 0),
    ApiKey.DELETE_TOPICS: ("delete_topics", "DeleteTopics", 1),
    ApiKey.INIT_PRODUCER_ID: ("init_producer_id", "InitProducerId", 0),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("offset_for_leader_epoch", "OffsetForLeaderEpoch", 1),
    ApiKey.DESCRIBE_ACLS: ("describe_acls", "DescribeAcls", 0),
    ApiKey.CREATE_ACLS: ("create_acls", "CreateAcls", 0),
    ApiKey.DELETE_ACLS: ("delete_acls", "DeleteAcls", 0),
    ApiKey.DESCRIBE_CONFIGS: ("describe_configs", "DescribeConfigs", 0),
    ApiKey.SASL_AUTHENTICATE: ("sasl_authenticate", "SaslAuthenticate", 0),
    ApiKey.CREATE_PARTITIONS: ("create_partitions", "CreatePartitions", 0),
    ApiKey.DELETE_GROUPS: ("delete_groups", "DeleteGroups", 0),
    ApiKey.ELECT_LEADERS: ("elect_leaders", "ElectLeaders", 0),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        "incremental_alter_configs",
        "IncrementalAlterConfigs",
        0,
    ),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        "alter_partition_reassignments",
        "AlterPartitionReassignments",
        1,
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (
        "list_partition_reassignments",
        "ListPartitionReassignments",
        0,
    ),
    ApiKey.OFFSET_DELETE: ("offset_delete", "OffsetDelete", 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ("describe_client_quotas", "DescribeClientQuotas", 0),
    ApiKey.ALTER_CLIENT_QUOTAS: ("alter_client_quotas", "AlterClientQuotas", 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        "describe_user_scram_credentials",
        "DescribeUserScramCredentials",
        0,
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (
        "alter_user_scram_credentials",
        "AlterUserScramCredentials",
        0,
    ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ("consumer_group_heartbeat", "ConsumerGroupHeartbeat", 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ("consumer_group_describe", "ConsumerGroupDescribe", 1),
}
_MESSAGES_PACKAGE: Final = "protocol.messages"
_KEY_BY_MODULE: Final = {f"{_MESSAGES_PACKAGE}.{m}": key for key, (m, _, _) in _TABLE.items()}
_loaded: dict[int, ApiSpec] = {}


def api_spec(api_key: int) -> ApiSpec:
    spec = _loaded.get(api_key)
    if spec is not None:
        return spec
    if api_key not in _TABLE:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    key = ApiKey(api_key)
    module_name, prefix, max_version = _TABLE[key]
    module = importlib.import_module(f"{_MESSAGES_PACKAGE}.{module_name}")
    spec = ApiSpec(
        key,
        getattr(module, f"{prefix}Request"),
        getattr(module, f"{prefix}Response"),
        0,
        max_version,
    )
    _loaded[key] = spec
    return spec


def api_key_of(request_type: type) -> ApiKey:
    """The api key whose request class is `request_type` (TypeError for any other type)."""
    key = _KEY_BY_MODULE.get(request_type.__module__)
    if key is None or api_spec(key).request is not request_type:
        raise TypeError(f"{request_type.__name__} is not a request type")
    return key


class _ApiTable(Mapping[int, ApiSpec]):
    """Every API's spec by key, read-only; looking one up imports its message module."""

    def __getitem__(self, api_key: int) -> ApiSpec:
        if api_key not in _TABLE:
            raise KeyError(api_key)
        return api_spec(api_key)

    def __iter__(self) -> Iterator[int]:
        return iter(_TABLE)

    def __len__(self) -> int:
        return len(_TABLE)


APIS: Final[Mapping[int, ApiSpec]] = _ApiTable()


def supported_versions() -> tuple[ApiVersionRange, ...]:
    """What an ApiVersions response lists."""
    return tuple(
        ApiVersionRange(key, 0, max_version) for key, (_, _, max_version) in _TABLE.items()
    )
