"""The active controller's steps, as ZooKeeper scripts: what both drivers run.

`LeadingController` holds the core's context for one controller term. Each step reads what it
needs, lets `controller.core.handle` decide, then executes the effects: ZooKeeper writes in
order (`zk_writes`), broker requests into `outbox` (the driver hands them to its channel), log
lines. The trio shell (controller.py) and the simulator call the same steps; only how a script
runs and how requests travel differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

import structlog

from controller.core import (
    LEADER_ELECTED,
    PREFERRED_REPLICA_IMBALANCE,
    UNCLEAN_LEADER_ELECTION,
    AlterReassignmentsReply,
    ControlledShutdownReply,
    ControllerContext,
    ControllerEvent,
    CreatePartitionStates,
    DeleteTopicZnodes,
    Effect,
    ElectLeadersReply,
    IsrChanged,
    LiveBroker,
    LogEvent,
    Resigned,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    WritePartitionStates,
    WriteReassignmentPlan,
    WriteTopicAssignment,
    handle,
    states_to_read,
)
from controller.zk_data import LOG_DIR_EVENT_NOTIFICATION_PATH
from controller.zk_isr import ISR_CHANGE_NOTIFICATION_PATH
from controller.zk_load import (
    load,
    read_event,
    read_isr_changes,
    read_log_dir_events,
    read_partition_states,
)
from controller.zk_script import ZkScript
from controller.zk_types import WatchEvent
from controller.zk_writes import delete_paths, write
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.stats import Timings

__all__ = ["BrokerRequest", "ControllerStats", "LeadingController", "Reply"]

BrokerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
Reply = ControlledShutdownReply | ElectLeadersReply | AlterReassignmentsReply


@dataclass
class ControllerStats:
    """Figures kept across terms (Kafka's controller metrics)."""

    unclean_leader_elections: int = 0  # UncleanLeaderElectionsPerSec, as a count
    preferred_replica_imbalance_count: int = -1  # -1: no check yet
    # Partitions given a leader (LeaderElectionRateAndTimeMs' rate, as a count), and the
    # duration of each step that elected some (the shell times it: ZooKeeper included).
    leader_elections: int = 0
    leader_election_time: Timings = field(default_factory=Timings)


@dataclass
class LeadingController:
    """One term as controller. `context` changes only when a step's effects all succeeded;
    a step that raises `ReloadNeeded` leaves it as it was (the next `load` re-reads)."""

    broker_id: int
    epoch: int
    epoch_zk_version: int
    context: ControllerContext
    outbox: list[tuple[int, BrokerRequest]] = field(default_factory=list)
    # The live brokers of the last decision, for the channel (set before any effect runs).
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    stats: ControllerStats = field(default_factory=ControllerStats)

    def load(self, now_ms: int) -> ZkScript[None]:
        """Read everything (at the start of the term, or after a failed write) and act on it."""
        elected = yield from load(self.broker_id, self.epoch, self.epoch_zk_version)
        yield from self.apply(elected, now_ms)
        yield from self.process_isr_changes(now_ms)  # those published meanwhile
        yield from self.process_log_dir_events(now_ms)

    def on_watch(self, event: WatchEvent, now_ms: int) -> ZkScript[None]:
        if event.path == ISR_CHANGE_NOTIFICATION_PATH:
            yield from self.process_isr_changes(now_ms)
            return
        if event.path == LOG_DIR_EVENT_NOTIFICATION_PATH:
            yield from self.process_log_dir_events(now_ms)
            return
        core_event = yield from read_event(self.broker_id, event, self.epoch_zk_version)
        if core_event is not None:
            yield from self.apply(core_event, now_ms)

    def process_isr_changes(self, now_ms: int) -> ZkScript[None]:
        """Take the leaders' ISR changes, then delete the notifications handled."""
        while True:
            found = yield from read_isr_changes(self.context.partition_states)
            if found is None:
                return
            changed, handled = found
            yield from self.apply(changed, now_ms)
            yield from delete_paths(handled, self.epoch_zk_version)

    def process_log_dir_events(self, now_ms: int) -> ZkScript[None]:
        """Brokers' log dir failures (KIP-112): take their offline replicas from the
        registrations, then delete the notifications handled."""
        while True:
            found = yield from read_log_dir_events()
            if found is None:
                return
            changed, handled = found
            yield from self.apply(changed, now_ms)
            yield from delete_paths(handled, self.epoch_zk_version)

    def serve(self, event: ControllerEvent, now_ms: int) -> ZkScript[Reply | None]:
        """A request from a broker or an operator: its answer (the core's last effect).
        The states it decides on are read first, as the core asks (`states_to_read`)."""
        partitions = states_to_read(self.context, event)
        if partitions:
            states = yield from read_partition_states(partitions)
            yield from self.apply(IsrChanged(states), now_ms)
        effects = yield from self.apply(event, now_ms)
        replies = [
            e
            for e in effects
            if isinstance(e, ControlledShutdownReply | ElectLeadersReply | AlterReassignmentsReply)
        ]
        return replies[-1] if replies else None

    def apply(self, event: ControllerEvent, now_ms: int) -> ZkScript[list[Effect]]:
        context, effects = handle(self.context, event, now_ms)
        self.live_brokers = dict(context.live_brokers)
        for effect in effects:
            match effect:
                case (
                    CreatePartitionStates()
                    | WritePartitionStates()
                    | WriteTopicAssignment()
                    | WriteReassignmentPlan()
                    | DeleteTopicZnodes()
                ):
                    yield from write(effect, context.epoch_zk_version)
                case SendLeaderAndIsr(broker_id, request) | SendStopReplica(broker_id, request):
                    self.outbox.append((broker_id, request))
                case SendUpdateMetadata(broker_ids, request):
                    self.outbox.extend((broker_id, request) for broker_id in broker_ids)
                case LogEvent():
                    self._log(effect)
                case ControlledShutdownReply() | ElectLeadersReply() | AlterReassignmentsReply():
                    pass  # `serve` returns it to the asker
                case _:
                    assert_never(effect)
        self.context = context
        return effects

    def resign(self, now_ms: int) -> None:
        self.context, _ = handle(self.context, Resigned(), now_ms)
        self.outbox.clear()

    def take_outbox(self) -> list[tuple[int, BrokerRequest]]:
        out, self.outbox = self.outbox, []
        return out

    def _log(self, effect: LogEvent) -> None:
        fields = dict(effect.fields)
        if effect.event == LEADER_ELECTED:
            self.stats.leader_elections += 1
        if effect.event == UNCLEAN_LEADER_ELECTION:
            self.stats.unclean_leader_elections += 1  # its ZooKeeper write came first
            fields["unclean_leader_elections"] = self.stats.unclean_leader_elections
        if effect.event == PREFERRED_REPLICA_IMBALANCE:
            count = fields["preferred_replica_imbalance_count"]
            self.stats.preferred_replica_imbalance_count = count
        log = structlog.get_logger("highwater.controller").bind(broker_id=self.broker_id)
        if effect.level == "warning":
            log.warning(effect.event, **fields)
        else:
            log.info(effect.event, **fields)
