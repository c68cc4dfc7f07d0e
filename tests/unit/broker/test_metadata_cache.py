"""MetadataCache: what Metadata answers after each UpdateMetadata the controller sends."""

from __future__ import annotations

import dataclasses

from broker.core.metadata_cache import MetadataCache
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.update_metadata import (
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicId,
)


def _endpoint(node: int) -> BrokerEndpoint:
    return BrokerEndpoint(node, f"host{node}", 9090 + node)


def _state(
    topic: str,
    partition: int,
    leader: int,
    *,
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    leader_epoch: int = 0,
    offline: tuple[int, ...] = (),
) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        topic_name=topic,
        partition_index=partition,
        controller_epoch=1,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=replicas if isr is None else isr,
        partition_epoch=0,
        replicas=replicas,
        offline_replicas=offline,
    )


def _update(
    states: tuple[UpdateMetadataPartitionState, ...] = (),
    live: tuple[int, ...] = (1, 2, 3),
    deleted: tuple[str, ...] = (),
    *,
    controller_id: int = 1,
    controller_epoch: int = 1,
) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id,
        controller_epoch,
        0,
        states,
        tuple(_endpoint(b) for b in live),
        deleted,
    )


def test_empty_cache_knows_nothing() -> None:
    cache = MetadataCache()
    assert cache.topic_metadata(None) == ()
    (topic,) = cache.topic_metadata(["t"])
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert topic.name == "t" and topic.partitions == ()
    assert cache.partition("t", 0) is None
    assert cache.live_broker_ids() == []


def test_update_sets_controller_brokers_and_partitions() -> None:
    cache = MetadataCache()
    cache.update(
        _update(
            (_state("t", 1, 2, leader_epoch=4), _state("t", 0, 1, leader_epoch=7)),
            live=(3, 1, 2),
            controller_id=2,
            controller_epoch=5,
        )
    )
    assert cache.controller_id == 2 and cache.controller_epoch == 5
    assert cache.live_broker_ids() == [1, 2, 3]
    assert cache.brokers[2] == _endpoint(2)
    (topic,) = cache.topic_metadata(None)
    assert topic.error_code == ErrorCode.NONE and topic.name == "t"
    assert [p.partition_index for p in topic.partitions] == [0, 1]  # sorted by index
    p0, p1 = topic.partitions
    assert (p0.error_code, p0.leader_id, p0.leader_epoch) == (ErrorCode.NONE, 1, 7)
    assert (p1.error_code, p1.leader_id, p1.leader_epoch) == (ErrorCode.NONE, 2, 4)
    assert p0.replica_nodes == (1, 2, 3) and p0.isr_nodes == (1, 2, 3)
    assert p0.offline_replicas == ()
    info = cache.partition("t", 1)
    assert info is not None and info.leader == 2 and info.leader_epoch == 4


def test_later_update_replaces_partition_state_and_live_brokers() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, 1, leader_epoch=1),)))
    cache.update(_update((_state("t", 0, 2, leader_epoch=2, isr=(2, 3)),), live=(2, 3)))
    assert cache.live_broker_ids() == [2, 3]
    (partition,) = cache.topic_metadata(["t"])[0].partitions
    assert partition.leader_id == 2 and partition.leader_epoch == 2
    assert partition.isr_nodes == (2, 3)


def test_update_without_a_topic_keeps_it() -> None:
    """UpdateMetadata carries only changed partitions; others stay as they were."""
    cache = MetadataCache()
    cache.update(_update((_state("a", 0, 1), _state("b", 0, 2))))
    cache.update(_update((_state("a", 0, 3, leader_epoch=1),)))
    assert sorted(cache.topics) == ["a", "b"]
    b = cache.partition("b", 0)
    assert b is not None and b.leader == 2


def test_deleted_topics_are_removed_and_reported() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("a", 0, 1), _state("b", 0, 2), _state("b", 1, 3))))
    deleted = cache.update(_update(deleted=("b", "never-existed")))
    assert deleted == ["b"]
    assert sorted(cache.topics) == ["a"]
    assert cache.partition("b", 0) is None
    (b,) = cache.topic_metadata(["b"])
    assert b.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and b.partitions == ()
    assert [t.name for t in cache.topic_metadata(None)] == ["a"]


def test_no_leader_is_leader_not_available() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, -1, leader_epoch=3, isr=(2,)),)))
    (partition,) = cache.topic_metadata(["t"])[0].partitions
    assert partition.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert partition.leader_id == -1
    assert partition.leader_epoch == 3
    assert partition.isr_nodes == (2,)


def test_leader_not_live_is_leader_not_available_with_leader_minus_one() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, 3),), live=(1, 2)))
    (topic,) = cache.topic_metadata(["t"])
    assert topic.error_code == ErrorCode.NONE  # the topic exists; the partition has the error
    (partition,) = topic.partitions
    assert partition.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert partition.leader_id == -1
    assert partition.replica_nodes == (1, 2, 3)


def test_leader_comes_back_when_broker_is_live_again() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, 3),), live=(1, 2)))
    cache.update(_update((), live=(1, 2, 3)))
    (partition,) = cache.topic_metadata(["t"])[0].partitions
    assert partition.error_code == ErrorCode.NONE and partition.leader_id == 3


def test_offline_replicas_are_the_replicas_on_dead_brokers() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, 1, replicas=(3, 1, 2)),), live=(1,)))
    (partition,) = cache.topic_metadata(["t"])[0].partitions
    assert partition.error_code == ErrorCode.NONE and partition.leader_id == 1
    assert partition.offline_replicas == (3, 2)  # in assignment order


def test_offline_replicas_reported_by_the_controller_are_kept() -> None:
    """Kafka serves the controller's offline_replicas (a replica on a failed log dir of a
    live broker is offline too); the cache stores them but must not drop them."""
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, 1, offline=(2,)),), live=(1, 2, 3)))
    info = cache.partition("t", 0)
    assert info is not None and info.offline_replicas == (2,)
    (partition,) = cache.topic_metadata(["t"])[0].partitions
    assert 2 in partition.offline_replicas


def test_mixed_known_and_unknown_topics_keep_request_order() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("b", 0, 1), _state("a", 0, 2))))
    names = ["zzz", "b", "a"]
    topics = cache.topic_metadata(names)
    assert [t.name for t in topics] == names
    assert [t.error_code for t in topics] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NONE,
        ErrorCode.NONE,
    ]
    assert [t.name for t in cache.topic_metadata(None)] == ["a", "b"]  # all, sorted


def test_topic_deleted_and_recreated_in_one_update_comes_back_fresh() -> None:
    cache = MetadataCache()
    cache.update(_update((_state("t", 0, 1), _state("t", 1, 1))))
    cache.update(_update(deleted=("t",)))
    cache.update(_update((_state("t", 0, 2),)))
    assert sorted(cache.topics["t"]) == [0]
    (partition,) = cache.topic_metadata(["t"])[0].partitions
    assert partition.leader_id == 2


def test_topic_ids_are_held_both_ways_and_forgotten_with_the_topic() -> None:
    cache = MetadataCache()
    update = _update((_state("t", 0, 1), _state("u", 0, 2)))
    ids = (UpdateMetadataTopicId("t", "AAAAAAAAAAAAAAAAAAAAAg"),)
    cache.update(dataclasses.replace(update, topic_ids=ids))
    assert cache.topic_id("t") == "AAAAAAAAAAAAAAAAAAAAAg" and cache.topic_id("u") == ""
    assert cache.topic_name("AAAAAAAAAAAAAAAAAAAAAg") == "t"
    (t, u) = cache.topic_metadata(["t", "u"])
    assert (t.topic_id, u.topic_id) == ("AAAAAAAAAAAAAAAAAAAAAg", "")
    (by_id, unknown) = cache.topic_metadata_by_id(["AAAAAAAAAAAAAAAAAAAAAg", "nope"])
    assert by_id == t
    assert (unknown.error_code, unknown.name, unknown.topic_id) == (
        ErrorCode.UNKNOWN_TOPIC_ID,
        "",
        "nope",
    )
    cache.update(_update(deleted=("t",)))
    assert cache.topic_name("AAAAAAAAAAAAAAAAAAAAAg") is None and cache.topic_id("t") == ""
