"""broker.core.group.find_coordinator: FindCoordinator's refusals (key type, empty group id,
no DESCRIBE) before any lookup, and each key's coordinator on the asking listener."""

from __future__ import annotations

from broker.core.group.coordinator import partition_for
from broker.core.group.find_coordinator import (
    answer_find_coordinator,
    find_coordinator_refusals,
    wants_offsets_topic,
)
from broker.core.metadata_cache import MetadataCache, PartitionInfo
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest
from protocol.topic_partition import OFFSETS_TOPIC

PARTITIONS = 4


def metadata(*, leader: int = 1, external: tuple[int, ...] = (1, 2)) -> MetadataCache:
    """Brokers 1 and 2 live; each offsets partition led by `leader`; the EXTERNAL listener
    only on `external`."""
    return MetadataCache(
        brokers={b: BrokerEndpoint(b, f"internal{b}", 9090 + b) for b in (1, 2)},
        topics={OFFSETS_TOPIC: {p: PartitionInfo(leader, 0, (1, 2), (1, 2), 0) for p in range(4)}},
        by_listener={
            "EXTERNAL": {b: BrokerEndpoint(b, f"external{b}", 19090 + b) for b in external}
        },
    )


def answer(
    request: FindCoordinatorRequest, cache: MetadataCache, listener: str | None
) -> list[Coordinator]:
    refused = find_coordinator_refusals(request, frozenset({"secret"}), lambda k: f"no {k}")
    return list(answer_find_coordinator(request, refused, cache, listener).coordinators)


def test_an_empty_group_id_is_invalid_and_a_hidden_group_refused() -> None:
    request = FindCoordinatorRequest(("", "secret", "g"))
    found = answer(request, metadata(), None)
    assert [(c.key, c.error_code) for c in found] == [
        ("", ErrorCode.INVALID_GROUP_ID),
        ("secret", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("g", ErrorCode.NONE),
    ]
    assert found[1].error_message == "no secret"
    assert (found[2].node_id, found[2].host, found[2].port) == (1, "internal1", 9091)


def test_another_key_type_is_an_invalid_request_for_every_key() -> None:
    request = FindCoordinatorRequest(("g", "h"), key_type=1)
    found = answer(request, metadata(), None)
    assert [c.error_code for c in found] == [ErrorCode.INVALID_REQUEST] * 2


def test_the_coordinator_is_given_at_its_address_on_the_asking_listener() -> None:
    found = answer(FindCoordinatorRequest(("g",)), metadata(leader=2), "EXTERNAL")
    assert (found[0].error_code, found[0].node_id, found[0].host) == (
        ErrorCode.NONE,
        2,
        "external2",
    )


def test_a_coordinator_without_the_asking_listener_is_not_available() -> None:
    found = answer(FindCoordinatorRequest(("g",)), metadata(leader=2, external=(1,)), "EXTERNAL")
    assert found[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert found[0].node_id == -1


def test_a_partition_without_a_live_leader_is_not_available() -> None:
    found = answer(FindCoordinatorRequest(("g",)), metadata(leader=-1), None)
    assert found[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert 0 <= partition_for("g", PARTITIONS) < PARTITIONS


def test_only_an_allowed_key_asks_for_the_offsets_topic() -> None:
    empty = MetadataCache()
    refused_only = FindCoordinatorRequest(("", "secret"))
    refused = find_coordinator_refusals(refused_only, frozenset({"secret"}), str)
    assert not wants_offsets_topic(refused_only, refused, empty)
    allowed = FindCoordinatorRequest(("secret", "g"))
    refused = find_coordinator_refusals(allowed, frozenset({"secret"}), str)
    assert wants_offsets_topic(allowed, refused, empty)
    assert not wants_offsets_topic(allowed, refused, metadata())
