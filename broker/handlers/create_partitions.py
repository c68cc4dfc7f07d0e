"""CreatePartitions: add partitions to existing topics (never remove).

As in Kafka's ZooKeeper mode, the broker that receives the request (any broker) validates it,
assigns replicas to the new partitions (the round robin continued, controller.assignment) and
writes the topic's new assignment to `/brokers/topics/<t>`, guarded by the znode version it
read; the controller, watching that znode, creates the new partitions' states, elects their
leaders and tells the brokers. The response waits, up to `timeout_ms`, until this broker's
metadata shows a leader for every partition.
"""

from __future__ import annotations

from broker.context import BrokerContext
from broker.handlers.create_topics import MAX_PARTITIONS, validate_topic_name
from broker.handlers.leader_wait import admin_deadline, wait_for_leaders
from controller.assignment import assign_new_partitions
from controller.zk_topics import (
    AssignmentChangedError,
    UnknownTopicError,
    add_partitions,
    get_assignment,
)
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from protocol.topic_partition import INTERNAL_TOPICS

__all__ = ["handle_create_partitions"]

_WRITE_ATTEMPTS = 3


async def handle_create_partitions(
    ctx: BrokerContext, header: RequestHeader, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    deadline = admin_deadline(request.timeout_ms)
    results: list[CreatePartitionsTopicResult] = []
    seen: set[str] = set()
    added: dict[str, int] = {}  # topic -> its new partition count
    for topic in request.topics:
        if topic.name in seen:
            results.append(_failed(topic, ErrorCode.INVALID_REQUEST, "topic named twice"))
            continue
        seen.add(topic.name)
        if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            denied = ctx.denied(AclOperation.ALTER, ResourceType.TOPIC, topic.name)
            results.append(_failed(topic, ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied))
            continue
        result = await _create_one(ctx, topic, request.validate_only)
        results.append(result)
        if result.error_code == ErrorCode.NONE and not request.validate_only:
            added[topic.name] = topic.count
    waiting = await wait_for_leaders(ctx, added, deadline)
    return CreatePartitionsResponse(
        tuple(
            CreatePartitionsTopicResult(
                r.name, ErrorCode.REQUEST_TIMED_OUT, "added, but leaders not yet elected"
            )
            if r.name in waiting
            else r
            for r in results
        )
    )


async def _create_one(
    ctx: BrokerContext, topic: CreatePartitionsTopic, validate_only: bool
) -> CreatePartitionsTopicResult:
    """Read, assign, write; again (a few times) if another writer changed the topic between
    our read and our write."""
    for _attempt in range(_WRITE_ATTEMPTS):
        try:
            return await _try_create(ctx, topic, validate_only)
        except AssignmentChangedError:
            continue
    return _failed(
        topic, ErrorCode.UNKNOWN_SERVER_ERROR, "the topic kept changing meanwhile; try again"
    )


async def _try_create(
    ctx: BrokerContext, topic: CreatePartitionsTopic, validate_only: bool
) -> CreatePartitionsTopicResult:
    if ctx.zk.absent:
        return _failed(topic, ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session")
    bad_name = validate_topic_name(topic.name)
    if bad_name is not None:  # no such topic can exist; never a ZooKeeper path built from it
        return _failed(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, bad_name)
    if topic.name in INTERNAL_TOPICS:  # groups are placed by its partition count
        return _failed(topic, ErrorCode.INVALID_REQUEST, f"{topic.name} is internal")
    try:
        existing, version = await ctx.zk.run(get_assignment(topic.name))
    except UnknownTopicError as exc:
        return _failed(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc))
    if topic.count <= len(existing):
        return _failed(
            topic,
            ErrorCode.INVALID_PARTITIONS,
            f"topic has {len(existing)} partitions; partitions can only be added "
            f"(asked for {topic.count})",
        )
    if topic.count > MAX_PARTITIONS:
        return _failed(
            topic, ErrorCode.INVALID_PARTITIONS, f"partitions must be at most {MAX_PARTITIONS}"
        )
    live = set(ctx.metadata.live_broker_ids())
    if topic.assignments is not None:
        added = {len(existing) + i: tuple(a.broker_ids) for i, a in enumerate(topic.assignments)}
        problem = _check_assignment(added, existing, topic.count, live)
        if problem is not None:
            return _failed(topic, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
    else:
        try:
            added = assign_new_partitions(live, existing, topic.count)
        except ValueError as exc:
            return _failed(topic, ErrorCode.INVALID_REPLICATION_FACTOR, str(exc))
    if validate_only:
        return CreatePartitionsTopicResult(topic.name, ErrorCode.NONE)
    try:
        await ctx.zk.run(add_partitions(topic.name, {**existing, **added}, version))
    except UnknownTopicError as exc:
        return _failed(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc))
    return CreatePartitionsTopicResult(topic.name, ErrorCode.NONE)


def _check_assignment(
    added: dict[int, tuple[int, ...]],
    existing: dict[int, tuple[int, ...]],
    count: int,
    live: set[int],
) -> str | None:
    if len(existing) + len(added) != count:
        return f"{count - len(existing)} new partitions need {count - len(existing)} assignments"
    replication_factor = len(next(iter(existing.values())))
    for partition, replicas in added.items():
        if len(replicas) != replication_factor:
            return f"partition {partition} needs {replication_factor} replicas"
        if len(set(replicas)) != len(replicas):
            return f"partition {partition} names a broker twice"
        unknown = [r for r in replicas if r not in live]
        if unknown:
            return f"partition {partition}: brokers {unknown} are not live"
    return None


def _failed(
    topic: CreatePartitionsTopic, code: ErrorCode, message: str
) -> CreatePartitionsTopicResult:
    return CreatePartitionsTopicResult(topic.name, code, message)
