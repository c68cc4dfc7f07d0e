"""Admin requests waiting for this broker's metadata, as delayed operations
(broker.core.delayed): Kafka's DelayedCreatePartitions (CreateTopics and CreatePartitions
answer once every partition has a leader) and DelayedDeleteTopics (DeleteTopics answers once
the topics are gone). Both watch METADATA_KEY, which every controller request wakes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from broker.core.actions import NO_ACTIONS, Actions
from broker.core.metadata_cache import PartitionInfo
from broker.core.state import METADATA_KEY, BrokerState
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeletableTopicResult

__all__ = ["DelayedCreatePartitions", "DelayedDeleteTopics"]

_WATCH_KEYS = (METADATA_KEY,)


class DelayedCreatePartitions:
    """Topics waiting until this broker's metadata shows each with at least its count of
    partitions (0: any), every one with a leader. `response()`: the topics still waiting
    (none once it completed; on expiry, the ones the caller answers REQUEST_TIMED_OUT)."""

    __slots__ = ("waiting",)

    watch_keys = _WATCH_KEYS

    def __init__(self, partition_counts: Mapping[str, int]) -> None:
        self.waiting = dict(partition_counts)

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        topics = state.metadata.topics
        self.waiting = {
            topic: count
            for topic, count in self.waiting.items()
            if not _all_led(topics.get(topic), count)
        }
        return not self.waiting

    def expire(self, now_ms: int) -> None:
        pass  # the topics still waiting are the answer

    def take_actions(self) -> Actions:
        return NO_ACTIONS

    def response(self) -> set[str]:
        return set(self.waiting)


def _all_led(partitions: Mapping[int, PartitionInfo] | None, partition_count: int) -> bool:
    return (
        partitions is not None
        and len(partitions) >= partition_count
        and all(p.leader >= 0 for p in partitions.values())
    )


class DelayedDeleteTopics:
    """DeleteTopics' results, the accepted ones (error NONE) waiting until their topics are
    gone from this broker's metadata; on expiry those are REQUEST_TIMED_OUT (Kafka's
    DelayedDeleteTopics.onComplete). `response()`: every result, by topic."""

    __slots__ = ("results", "waiting")

    watch_keys = _WATCH_KEYS

    def __init__(self, results: Mapping[str, DeletableTopicResult]) -> None:
        self.results = dict(results)
        self.waiting = {name for name, r in results.items() if r.error_code == ErrorCode.NONE}

    def try_complete(self, state: BrokerState, now_ms: int, woken: bool = True) -> bool:
        self.waiting = {name for name in self.waiting if name in state.metadata.topics}
        return not self.waiting

    def expire(self, now_ms: int) -> None:
        for name in self.waiting:
            self.results[name] = replace(
                self.results[name],
                error_code=ErrorCode.REQUEST_TIMED_OUT,
                error_message="deletion requested, not yet complete",
            )

    def take_actions(self) -> Actions:
        return NO_ACTIONS

    def response(self) -> dict[str, DeletableTopicResult]:
        return self.results
