"""One handler per API: `async (ctx, header, request) -> response` (None: send nothing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.context import BrokerContext
from broker.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from broker.handlers.alter_client_quotas import handle_alter_client_quotas
from broker.handlers.api_versions import handle_api_versions
from broker.handlers.classic_groups import (
    handle_describe_groups,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_sync_group,
)
from broker.handlers.consumer_group_describe import handle_consumer_group_describe
from broker.handlers.consumer_group_heartbeat import handle_consumer_group_heartbeat
from broker.handlers.controlled_shutdown import handle_controlled_shutdown
from broker.handlers.create_partitions import handle_create_partitions
from broker.handlers.create_topics import handle_create_topics
from broker.handlers.delete_groups import handle_delete_groups
from broker.handlers.delete_topics import handle_delete_topics
from broker.handlers.describe_client_quotas import handle_describe_client_quotas
from broker.handlers.describe_cluster import handle_describe_cluster
from broker.handlers.describe_configs import handle_describe_configs
from broker.handlers.elect_leaders import handle_elect_leaders
from broker.handlers.fetch import handle_fetch
from broker.handlers.find_coordinator import handle_find_coordinator
from broker.handlers.incremental_alter_configs import handle_incremental_alter_configs
from broker.handlers.init_producer_id import handle_init_producer_id
from broker.handlers.leader_and_isr import handle_leader_and_isr
from broker.handlers.list_groups import handle_list_groups
from broker.handlers.list_offsets import handle_list_offsets
from broker.handlers.metadata import handle_metadata
from broker.handlers.offset_commit import handle_offset_commit
from broker.handlers.offset_delete import handle_offset_delete
from broker.handlers.offset_fetch import handle_offset_fetch
from broker.handlers.offset_for_leader_epoch import handle_offset_for_leader_epoch
from broker.handlers.partition_reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from broker.handlers.produce import handle_produce
from broker.handlers.sasl import handle_sasl_authenticate, handle_sasl_handshake
from broker.handlers.stop_replica import handle_stop_replica
from broker.handlers.update_metadata import handle_update_metadata
from broker.handlers.user_scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from protocol.apis import ApiKey
from protocol.codec import RequestHeader
from protocol.kafka.versions import KafkaOnlyApi

__all__ = ["HANDLERS", "Handler"]

Handler = Callable[[BrokerContext, RequestHeader, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.LEADER_AND_ISR: handle_leader_and_isr,
    ApiKey.STOP_REPLICA: handle_stop_replica,
    ApiKey.UPDATE_METADATA: handle_update_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.CONTROLLED_SHUTDOWN: handle_controlled_shutdown,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    # Only on a Kafka listener (broker.kafka): their requests are kio's classes.
    KafkaOnlyApi.JOIN_GROUP: handle_join_group,
    KafkaOnlyApi.SYNC_GROUP: handle_sync_group,
    KafkaOnlyApi.HEARTBEAT: handle_heartbeat,
    KafkaOnlyApi.LEAVE_GROUP: handle_leave_group,
    KafkaOnlyApi.DESCRIBE_GROUPS: handle_describe_groups,
    KafkaOnlyApi.DESCRIBE_CLUSTER: handle_describe_cluster,
}
