"""Per-API translation between a Kafka request (kio's classes) and the Highwater request the
broker's handler takes, and back for the response. Pure.

Most APIs need nothing but protocol.kafka.mapping's field-by-name conversion. What is
written out here is where the two differ: record batches (Produce, Fetch), the ApiVersions
table, Metadata's topic list, DescribeUserScramCredentials' user structs, and two safety
rules of this listener: every request is a client's (replica_id is forced to -1, so no
follower privileges: Kafka's own listeners refuse those without CLUSTER_ACTION) and Fetch's
last stable offset is the high watermark (no transactions). The group APIs' differences are
in broker.kafka.translate_groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from broker.kafka.translate_groups import (
    consumer_group_describe_response,
    consumer_group_heartbeat,
    find_coordinator,
    find_coordinator_response,
    offset_commit,
    offset_commit_response,
)
from broker.kafka.translated import Translated, topic_id_of
from protocol.apis import ApiKey, api_spec
from protocol.errors import ErrorCode, HighwaterError
from protocol.kafka.frames import KafkaRequest, response_class
from protocol.kafka.mapping import ZERO_UUID, convert
from protocol.kafka.records import from_kafka_batches, to_kafka_batches
from protocol.kafka.versions import ADVERTISED, KAFKA_ONLY_KEYS
from protocol.messages.api_versions import ApiVersionRange, ApiVersionsResponse
from protocol.messages.delete_acls import DeleteAclsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_acls import AclFilterSpec, DescribeAclsRequest
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from protocol.topic_id import from_uuid

__all__ = ["Translated", "advertised_versions", "request_to_highwater", "response_to_kafka"]


def advertised_versions() -> ApiVersionsResponse:
    return ApiVersionsResponse(
        ErrorCode.NONE,
        tuple(ApiVersionRange(key, low, high) for key, (low, high) in ADVERTISED.items()),
    )


def request_to_highwater(kafka: KafkaRequest) -> Translated:
    key = kafka.header.api_key
    if key in KAFKA_ONLY_KEYS:
        return Translated(key, kafka.body, kafka)  # their handlers take kio's classes
    special = _REQUESTS.get(key)
    if special is not None:
        return special(kafka)
    return Translated(key, convert(kafka.body, api_spec(key).request), kafka)


def response_to_kafka(translated: Translated, response: Any) -> Any:
    key = translated.api_key
    target = response_class(key, translated.kafka.header.api_version)
    special = _RESPONSES.get(key)
    if special is not None:
        response = special(translated, response)
    return convert(response, target)


def _metadata(kafka: KafkaRequest) -> Translated:
    body = kafka.body
    topics: tuple[str, ...] | None
    by_id: tuple[str, ...] = ()
    if body.topics is None or (kafka.header.api_version == 0 and not body.topics):
        topics = None  # v0: an empty list asks for every topic
    else:
        topics = tuple(t.name for t in body.topics if t.name is not None)
        # v10+: a topic named by id alone (KIP-516); a zero id with no name asks for nothing.
        by_id = tuple(
            from_uuid(t.topic_id)
            for t in body.topics
            if t.name is None and getattr(t, "topic_id", None) not in (None, ZERO_UUID)
        )
    allow = bool(getattr(body, "allow_auto_topic_creation", kafka.header.api_version < 4))
    return Translated(ApiKey.METADATA, MetadataRequest(topics, allow, by_id), kafka)


def _metadata_response(translated: Translated, response: Any) -> Any:
    """A topic asked for by an unknown id has a null name, as in Kafka, from v12 (where the
    response's name became nullable; v10 and v11 get "")."""
    if translated.kafka.header.api_version < _METADATA_NULL_NAMES or not any(
        t.error_code == ErrorCode.UNKNOWN_TOPIC_ID for t in response.topics
    ):
        return response
    topics = tuple(
        _Unnamed(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)} | {"name": None})
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_ID
        else t
        for t in response.topics
    )
    return dataclasses.replace(response, topics=topics)


_METADATA_NULL_NAMES: Final = 12


@dataclass(frozen=True, slots=True)
class _Unnamed:
    """A Metadata topic without a name (asked for by an unknown id)."""

    error_code: int
    name: str | None
    partitions: tuple[Any, ...]
    is_internal: bool
    topic_id: str


def _fetch(kafka: KafkaRequest) -> Translated:
    if kafka.header.api_version < _FETCH_TOPIC_IDS:
        request = dataclasses.replace(convert(kafka.body, FetchRequest), replica_id=-1)
        return Translated(ApiKey.FETCH, request, kafka)
    # v13+ names topics by id (KIP-516), and v15 moved replica_id into replica_state; the
    # broker's handler resolves ids to names (broker.core.fetch_topic_ids).
    body = kafka.body
    topics = tuple(
        FetchTopic(
            "", tuple(convert(p, FetchPartition) for p in t.partitions), topic_id_of(t.topic_id)
        )
        for t in body.topics
    )
    forgotten = tuple(
        ForgottenTopic("", tuple(t.partitions), topic_id_of(t.topic_id))
        for t in body.forgotten_topics_data
    )
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=int(body.max_wait.total_seconds() * 1000),
        min_bytes=body.min_bytes,
        max_bytes=body.max_bytes,
        topics=topics,
        isolation_level=body.isolation_level,
        session_id=body.session_id,
        session_epoch=body.session_epoch,
        forgotten_topics_data=forgotten,
    )
    return Translated(ApiKey.FETCH, request, kafka)


_FETCH_TOPIC_IDS: Final = 13


def _fetch_response(translated: Translated, response: Any) -> Any:
    topics = []
    for topic in response.responses:
        partitions = []
        for p in topic.partitions:
            partitions.append(
                dataclasses.replace(
                    p,
                    records=to_kafka_batches(p.records) if p.records else p.records,
                    last_stable_offset=p.high_watermark,
                )
            )
        topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
    return dataclasses.replace(response, responses=tuple(topics))


def _delete_topics(kafka: KafkaRequest) -> Translated:
    """v6 names each topic by name or by id (KIP-516)."""
    if kafka.header.api_version < _DELETE_TOPICS_BY_ID:
        return Translated(ApiKey.DELETE_TOPICS, convert(kafka.body, DeleteTopicsRequest), kafka)
    body = kafka.body
    request = DeleteTopicsRequest(
        topic_names=tuple(t.name for t in body.topics if t.name is not None),
        timeout_ms=int(body.timeout.total_seconds() * 1000),
        topic_ids=tuple(topic_id_of(t.topic_id) for t in body.topics if t.name is None),
    )
    return Translated(ApiKey.DELETE_TOPICS, request, kafka)


def _delete_topics_response(translated: Translated, response: Any) -> Any:
    """v6: a topic asked for by an unknown id has a null name, as in Kafka."""
    if translated.kafka.header.api_version < _DELETE_TOPICS_BY_ID:
        return response
    results = tuple(
        _UnnamedResult(None, r.error_code, r.error_message, r.topic_id) if not r.name else r
        for r in response.responses
    )
    return dataclasses.replace(response, responses=results)


_DELETE_TOPICS_BY_ID: Final = 6


@dataclass(frozen=True, slots=True)
class _UnnamedResult:
    name: str | None
    error_code: int
    error_message: str | None
    topic_id: str


def _produce(kafka: KafkaRequest) -> Translated:
    body = kafka.body
    topics = []
    refused = []
    for topic in body.topic_data:
        accepted = []
        for p in topic.partition_data:
            try:
                records = from_kafka_batches(bytes(p.records or b""))
            except HighwaterError as exc:
                refused.append(
                    (
                        topic.name,
                        ProducePartitionResponse(p.index, exc.code, error_message=exc.message),
                    )
                )
                continue
            accepted.append(ProducePartitionData(p.index, records))
        if accepted:
            topics.append(ProduceTopicData(topic.name, tuple(accepted)))
    timeout_ms = int(body.timeout.total_seconds() * 1000)
    request = ProduceRequest(body.acks, timeout_ms, tuple(topics), body.transactional_id)
    return Translated(ApiKey.PRODUCE, request, kafka, tuple(refused))


def _produce_response(translated: Translated, response: ProduceResponse) -> ProduceResponse:
    if not translated.refused:
        return response
    by_topic = {t.name: list(t.partition_responses) for t in response.responses}
    for name, refused in translated.refused:
        by_topic.setdefault(name, []).append(refused)
    return dataclasses.replace(
        response,
        responses=tuple(ProduceTopicResponse(n, tuple(ps)) for n, ps in by_topic.items()),
    )


def _acl_filter(kafka_filter: Any) -> AclFilterSpec:
    """DescribeAcls' and DeleteAcls' filter: Kafka's `*_filter` names, flat."""
    return AclFilterSpec(
        resource_type=kafka_filter.resource_type_filter,
        resource_name=kafka_filter.resource_name_filter,
        pattern_type=getattr(kafka_filter, "pattern_type_filter", 3),  # v0: LITERAL (3)
        principal=kafka_filter.principal_filter,
        host=kafka_filter.host_filter,
        operation=kafka_filter.operation,
        permission_type=kafka_filter.permission_type,
    )


def _describe_acls(kafka: KafkaRequest) -> Translated:
    return Translated(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(_acl_filter(kafka.body)), kafka)


def _delete_acls(kafka: KafkaRequest) -> Translated:
    filters = tuple(map(_acl_filter, kafka.body.filters))
    return Translated(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters), kafka)


def _elect_leaders(kafka: KafkaRequest) -> Translated:
    body = kafka.body
    partitions = None
    if body.topic_partitions is not None:
        partitions = tuple(
            TopicPartitions(t.topic, tuple(t.partitions)) for t in body.topic_partitions
        )
    request = ElectLeadersRequest(
        getattr(body, "election_type", 0),  # v0: preferred elections only
        partitions,
        int(body.timeout.total_seconds() * 1000),
    )
    return Translated(ApiKey.ELECT_LEADERS, request, kafka)


def _describe_user_scram_credentials(kafka: KafkaRequest) -> Translated:
    """Kafka names each user in a struct of its own (`UserName`), Highwater by its name."""
    users = kafka.body.users
    names = None if users is None else tuple(u.name for u in users)
    request = DescribeUserScramCredentialsRequest(names)
    return Translated(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request, kafka)


def _api_versions_response(translated: Translated, response: Any) -> Any:
    return advertised_versions()


def _forced_client(key: int) -> Callable[[KafkaRequest], Translated]:
    def translate(kafka: KafkaRequest) -> Translated:
        request = convert(kafka.body, api_spec(key).request)
        return Translated(key, dataclasses.replace(request, replica_id=-1), kafka)

    return translate


_REQUESTS: Final[dict[int, Callable[[KafkaRequest], Translated]]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.METADATA: _metadata,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DESCRIBE_ACLS: _describe_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ApiKey.LIST_OFFSETS: _forced_client(ApiKey.LIST_OFFSETS),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _forced_client(ApiKey.OFFSET_FOR_LEADER_EPOCH),
}

_RESPONSES: Final[dict[int, Callable[[Translated, Any], Any]]] = {
    ApiKey.PRODUCE: _produce_response,
    ApiKey.FETCH: _fetch_response,
    ApiKey.METADATA: _metadata_response,
    ApiKey.DELETE_TOPICS: _delete_topics_response,
    ApiKey.FIND_COORDINATOR: find_coordinator_response,
    ApiKey.API_VERSIONS: _api_versions_response,
    ApiKey.OFFSET_COMMIT: offset_commit_response,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe_response,
}
