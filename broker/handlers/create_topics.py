"""CreateTopics: validate, assign replicas, write the topic to ZooKeeper, wait for leaders.

As in Kafka's ZooKeeper mode, the broker that receives the request writes the assignment
(`/brokers/topics/<t>`) and config (`/config/topics/<t>`); the controller sees the new topic,
elects leaders and tells the brokers. The response waits, up to `timeout_ms`, until this
broker's metadata shows a leader for every partition.
"""

from __future__ import annotations

import random
import re

from broker.config.topic_config import TopicConfigError, validate_topic_config
from broker.context import BrokerContext
from broker.handlers.leader_wait import admin_deadline, wait_for_leaders
from controller.assignment import assign_replicas
from controller.zk_topics import TopicExistsError, create_topic
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    CreateTopicsResult,
)
from protocol.topic_partition import INTERNAL_TOPICS

__all__ = ["handle_create_topics", "validate_topic_name"]

MAX_TOPIC_NAME_CHARS = 249
MAX_PARTITIONS = 10_000
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> str | None:
    """Kafka's rules; the reason a name is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_CHARS:
        return f"topic name is longer than {MAX_TOPIC_NAME_CHARS} characters"
    if not _LEGAL_NAME.fullmatch(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


async def handle_create_topics(
    ctx: BrokerContext, header: RequestHeader, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    deadline = admin_deadline(request.timeout_ms)
    results = []
    seen: set[str] = set()
    created: list[CreatableTopic] = []
    for topic in request.topics:
        if topic.name in seen:
            results.append(_failed(topic, ErrorCode.INVALID_REQUEST, "topic named twice"))
            continue
        seen.add(topic.name)
        # Kafka: CREATE on the cluster, or on the topic.
        if not ctx.authorize_cluster(AclOperation.CREATE, log_denied=False) and not ctx.authorize(
            AclOperation.CREATE, ResourceType.TOPIC, topic.name
        ):
            denied = ctx.denied(AclOperation.CREATE, ResourceType.TOPIC, topic.name)
            results.append(_failed(topic, ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied))
            continue
        result = await _create_one(ctx, topic, request.validate_only)
        results.append(result)
        if result.error_code == ErrorCode.NONE and not request.validate_only:
            created.append(topic)
    waiting = await wait_for_leaders(ctx, dict.fromkeys((t.name for t in created), 0), deadline)
    final = [
        _failed_name(r, ErrorCode.REQUEST_TIMED_OUT, "created, but leaders not yet elected")
        if r.name in waiting
        else r
        for r in results
    ]
    return CreateTopicsResponse(tuple(final))


async def _create_one(
    ctx: BrokerContext, topic: CreatableTopic, validate_only: bool
) -> CreateTopicsResult:
    reason = validate_topic_name(topic.name)
    if reason is not None:
        return _failed(topic, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    if topic.name in ctx.metadata.topics:
        return _failed(topic, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} exists")
    if topic.name in INTERNAL_TOPICS:
        return _failed(
            topic, ErrorCode.INVALID_REQUEST, f"{topic.name} is internal: the brokers create it"
        )
    try:
        config = validate_topic_config({c.name: c.value for c in topic.configs})
    except TopicConfigError as exc:
        return _failed(topic, ErrorCode.INVALID_CONFIG, str(exc))
    live = ctx.metadata.live_broker_ids()
    if not live:
        # Just started: the controller's first UpdateMetadata has not arrived. A retriable
        # error, not INVALID_REPLICATION_FACTOR, which would blame the request.
        return _failed(
            topic, ErrorCode.NOT_CONTROLLER, "this broker has no cluster metadata yet: retry"
        )
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _failed(
                topic,
                ErrorCode.INVALID_REQUEST,
                "give either assignments or partitions/replication factor, not both",
            )
        assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
        problem = _check_assignment(assignment, set(live))
        if problem is not None:
            return _failed(topic, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
    else:
        partitions = (
            ctx.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        )
        replication_factor = (
            ctx.config.default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        if not 1 <= partitions <= MAX_PARTITIONS:
            return _failed(
                topic, ErrorCode.INVALID_PARTITIONS, f"partitions must be in [1, {MAX_PARTITIONS}]"
            )
        if replication_factor < 1 or replication_factor > len(live):
            return _failed(
                topic,
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} must be in [1, {len(live)}] "
                f"({len(live)} live brokers)",
            )
        assignment = assign_replicas(
            live,
            partitions,
            replication_factor,
            start_index=random.randrange(len(live)),
            shift=random.randrange(len(live)),
        )
    if validate_only:
        return _ok(topic.name, assignment)
    if ctx.zk.absent:
        return _failed(topic, ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session")
    try:
        await ctx.zk.run(create_topic(topic.name, assignment, config))
    except TopicExistsError:
        return _failed(topic, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} exists")
    return _ok(topic.name, assignment)


def _check_assignment(assignment: dict[int, tuple[int, ...]], live: set[int]) -> str | None:
    if sorted(assignment) != list(range(len(assignment))):
        return "partitions must be numbered 0..n-1"
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        return "every partition needs the same, non-zero number of replicas"
    for index, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            return f"partition {index} names a broker twice"
        unknown = [r for r in replicas if r not in live]
        if unknown:
            return f"partition {index}: brokers {unknown} are not live"
    return None


def _ok(name: str, assignment: dict[int, tuple[int, ...]]) -> CreateTopicsResult:
    replication_factor = len(next(iter(assignment.values())))
    return CreateTopicsResult(name, ErrorCode.NONE, None, len(assignment), replication_factor)


def _failed(topic: CreatableTopic, code: ErrorCode, message: str) -> CreateTopicsResult:
    return CreateTopicsResult(topic.name, code, message)


def _failed_name(result: CreateTopicsResult, code: ErrorCode, message: str) -> CreateTopicsResult:
    return CreateTopicsResult(
        result.name, code, message, result.num_partitions, result.replication_factor
    )
