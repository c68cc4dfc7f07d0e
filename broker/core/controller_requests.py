"""The controller's requests to a broker, applied: LeaderAndIsr, UpdateMetadata, StopReplica.

Each returns the response, the changes to the followers' fetching (`FollowerChange`: follow
a leader from an epoch, or stop) and the purgatory keys to wake (waiting fetches and produces
re-check leadership). The shell first fences the request (`BrokerState.admit_...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from broker.core.actions import Actions
from broker.core.state import METADATA_KEY, BrokerState
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition

__all__ = [
    "ControllerRequestOutcome",
    "FollowerChange",
    "apply_leader_and_isr",
    "apply_stop_replica",
    "apply_update_metadata",
]

R = TypeVar("R")
WakeKey = TopicPartition | tuple[str]


@dataclass(frozen=True, slots=True)
class FollowerChange:
    """Fetch `tp` from `leader` in `leader_epoch` (truncating first), or (leader None) stop."""

    tp: TopicPartition
    leader: BrokerEndpoint | None = None
    leader_epoch: int = -1


@dataclass(slots=True)
class ControllerRequestOutcome(Generic[R]):
    response: R
    followers: list[FollowerChange] = field(default_factory=list)
    wake: list[WakeKey] = field(default_factory=list)

    @property
    def actions(self) -> Actions:
        """Fetchers to change, keys to wake (leadership or metadata moved), and the group
        coordinator to follow its offsets partitions."""
        return Actions(self.wake, follower_changes=self.followers, group_resync=True)


def apply_leader_and_isr(
    state: BrokerState,
    request: LeaderAndIsrRequest,
    topic_configs: Mapping[str, Mapping[str, str]],
    now_ms: int,
    *,
    wall_ms: int,
) -> ControllerRequestOutcome[LeaderAndIsrResponse]:
    """Lead or follow these partitions from this epoch on. `topic_configs`: each topic's
    `/config/topics/<t>` (read by the shell). `now_ms` is monotonic, `wall_ms` the wall
    clock (see ReplicaManager.become_leader_or_follower)."""
    results = state.replica_manager.become_leader_or_follower(
        request.partition_states, now_ms, topic_configs, wall_ms=wall_ms
    )
    response = LeaderAndIsrResponse(
        ErrorCode.NONE,
        tuple(LeaderAndIsrPartitionError(t, p, code) for t, p, code in results),
    )
    outcome = ControllerRequestOutcome(response)
    # Followers fetch from their leader; leaders and partitions without a live leader from
    # no one.
    leaders: dict[int, BrokerEndpoint] = dict(state.metadata.brokers)
    leaders.update({b.node_id: b for b in request.live_leaders})
    for topic, index, code in results:
        tp = TopicPartition(topic, index)
        partition = state.replica_manager.partitions.get(tp)
        outcome.wake.append(tp)
        if code != ErrorCode.NONE or partition is None:
            continue
        leader = leaders.get(partition.leader_id)
        if partition.is_leader or leader is None:
            outcome.followers.append(FollowerChange(tp))
        else:
            outcome.followers.append(FollowerChange(tp, leader, partition.leader_epoch))
    outcome.wake.append(METADATA_KEY)
    return outcome


def apply_update_metadata(
    state: BrokerState, request: UpdateMetadataRequest
) -> ControllerRequestOutcome[UpdateMetadataResponse]:
    """Refresh the metadata cache. The controller always sends the whole picture, so a
    partition it no longer places here (topic deleted, replica moved away) goes, unless a
    LeaderAndIsr claimed it in the same controller's term or a later leader epoch (a replica
    that missed its StopReplica while down; ReplicaManager.delete_stray_logs)."""
    state.metadata.update(request)
    placed = {TopicPartition(s.topic_name, s.partition_index): s for s in request.partition_states}
    deleted = state.replica_manager.delete_stray_logs(
        {tp: s.replicas for tp, s in placed.items()},
        {tp: s.leader_epoch for tp, s in placed.items()},
        request.controller_epoch,
    )
    outcome = ControllerRequestOutcome(UpdateMetadataResponse(ErrorCode.NONE), wake=[METADATA_KEY])
    outcome.followers = [FollowerChange(tp) for tp in deleted]
    outcome.wake += deleted
    return outcome


def apply_stop_replica(
    state: BrokerState, request: StopReplicaRequest
) -> ControllerRequestOutcome[StopReplicaResponse]:
    """Stop serving partitions (no more fetching), and delete them if asked."""
    outcome = ControllerRequestOutcome(StopReplicaResponse(ErrorCode.NONE, ()))
    errors = []
    for topic in request.topic_states:
        for partition_state in topic.partition_states:
            tp = TopicPartition(topic.topic_name, partition_state.partition_index)
            outcome.followers.append(FollowerChange(tp))
            try:
                state.replica_manager.stop_replica(tp, delete=partition_state.delete_partition)
                code = ErrorCode.NONE
            except OSError:
                code = ErrorCode.KAFKA_STORAGE_ERROR
            errors.append(StopReplicaPartitionError(tp.topic, tp.partition, code))
            outcome.wake.append(tp)
    outcome.response = StopReplicaResponse(ErrorCode.NONE, tuple(errors))
    outcome.wake.append(METADATA_KEY)
    return outcome
