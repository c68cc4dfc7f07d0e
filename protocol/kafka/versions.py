"""What a Kafka listener advertises in ApiVersions: (min, max) per api key.

Topic IDs (KIP-516): Metadata 10+ carries each topic's id and Fetch 13+ names topics by id
(broker.core.fetch_topic_ids); Produce stops at 9, below Kafka 4.1's topic ids (13).
Produce is advertised from 0, as Kafka 4 does, because librdkafka before 2.6 stops compressing
unless it is (KAFKA-18659); a request below `DECODED_MIN` is refused as an unsupported
version. docs/kafka.md has the table with what each API does here.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["ADVERTISED", "API_VERSIONS_KEY", "DECODED", "KAFKA_ONLY_KEYS", "KafkaOnlyApi"]


class KafkaOnlyApi(enum.IntEnum):
    """APIs only the Kafka listener speaks: the classic group protocol, hosted in KIP-848
    groups (broker.core.group.classic), and DescribeCluster."""

    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    DESCRIBE_CLUSTER = 60


KAFKA_ONLY_KEYS: Final = frozenset(int(key) for key in KafkaOnlyApi)


API_VERSIONS_KEY: Final = 18

# api key -> (min, max) version advertised.
ADVERTISED: Final[dict[int, tuple[int, int]]] = {
    0: (0, 9),  # Produce
    1: (4, 16),  # Fetch (KIP-227 sessions from 7, topic ids from 13, v15 replica_state)
    2: (1, 7),  # ListOffsets (7: max timestamp, KIP-734)
    3: (0, 12),  # Metadata (topic ids from 10)
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch
    10: (0, 3),  # FindCoordinator
    11: (0, 9),  # JoinGroup (protocol_type consumer)
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    18: (0, 3),  # ApiVersions
    16: (0, 4),  # ListGroups
    17: (0, 1),  # SaslHandshake (v0: raw SASL tokens follow, broker.core.connection)
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics (6: topics by name or by id)
    22: (0, 4),  # InitProducerId (non-transactional)
    23: (2, 4),  # OffsetForLeaderEpoch
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    36: (0, 2),  # SaslAuthenticate (1+: session_lifetime_ms, KIP-368 re-authentication)
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas (kafka-configs --entity-type users|clients)
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 0),  # DescribeCluster (1 adds KIP-919's endpoint types: controllers are not described)
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; partitions by topic id; 1: topic regex)
    69: (0, 1),  # ConsumerGroupDescribe (KIP-848; partitions by topic id; 1: member_type)
}

# api key -> (min, max) version this listener decodes (kio has no Produce below 3).
DECODED: Final[dict[int, tuple[int, int]]] = {
    key: (3 if key == 0 else low, high) for key, (low, high) in ADVERTISED.items()
}
