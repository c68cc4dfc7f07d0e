"""FindCoordinator's answer (Kafka's KafkaApis.handleFindCoordinatorRequest): the broker
leading a group's `__consumer_offsets` partition, on the listener the request came in on.

Refusals come first (a wrong key type, an empty group id, a group the principal may not
DESCRIBE: broker/core/request_acls.py), because only a key that passes them may create the
offsets topic; then each other key is looked up. The handler (broker/handlers/find_coordinator.py)
and the simulator both call these.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from broker.core.group.writes import coordinator_of
from broker.core.metadata_cache import MetadataCache
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import (
    GROUP_KEY_TYPE,
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from protocol.topic_partition import OFFSETS_TOPIC

__all__ = ["answer_find_coordinator", "find_coordinator_refusals", "wants_offsets_topic"]


def _failed(key: str, code: ErrorCode, message: str) -> Coordinator:
    return Coordinator(key, -1, "", -1, code, message)


def find_coordinator_refusals(
    request: FindCoordinatorRequest,
    not_described: Collection[str],
    denied_message: Callable[[str], str],
) -> dict[str, Coordinator]:
    """The keys answered without a lookup, each with its answer; `not_described` are the
    group ids the principal may not DESCRIBE (`denied_message(key)` says so)."""
    if request.key_type != GROUP_KEY_TYPE:
        message = "only group coordinators (key type 0)"
        return {k: _failed(k, ErrorCode.INVALID_REQUEST, message) for k in request.coordinator_keys}
    refused: dict[str, Coordinator] = {}
    for key in request.coordinator_keys:
        if not key:
            refused[key] = _failed(key, ErrorCode.INVALID_GROUP_ID, "a group id is not empty")
        elif key in not_described:
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            refused[key] = _failed(key, code, denied_message(key))
    return refused


def wants_offsets_topic(
    request: FindCoordinatorRequest, refused: Collection[str], metadata: MetadataCache
) -> bool:
    """True when an allowed key asks and the offsets topic does not exist yet: the first
    authorized ask creates it (Kafka's behaviour)."""
    allowed = any(k not in refused for k in request.coordinator_keys)
    return allowed and OFFSETS_TOPIC not in metadata.topics


def answer_find_coordinator(
    request: FindCoordinatorRequest,
    refused: dict[str, Coordinator],
    metadata: MetadataCache,
    listener: str | None,
) -> FindCoordinatorResponse:
    """Each key's coordinator at its address on `listener` (None: the inter-broker one), or
    COORDINATOR_NOT_AVAILABLE while the partition has no leader or the leader has no
    endpoint on that listener (a client retries)."""
    reachable = metadata.brokers_on(listener)
    found = []
    for key in request.coordinator_keys:
        if key in refused:
            found.append(refused[key])
            continue
        broker = coordinator_of(metadata, key)
        if broker is None:
            message = "the offsets topic has no leader"
            found.append(_failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, message))
        elif broker.node_id not in reachable:
            message = "the coordinator has no endpoint on this listener"
            found.append(_failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, message))
        else:
            broker = reachable[broker.node_id]
            found.append(Coordinator(key, broker.node_id, broker.host, broker.port, ErrorCode.NONE))
    return FindCoordinatorResponse(tuple(found))
