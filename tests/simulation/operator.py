"""An operator's tools against the simulated cluster, as the real ones reach it.

Reassignments and leader elections are requests to the controller (the broker handlers turn
AlterPartitionReassignments and ElectLeaders into these core events); topics are created and
deleted with the same ZooKeeper scripts as CreateTopics and DeleteTopics, and configs altered
as IncrementalAlterConfigs alters them (broker/config/config_admin.py, then the entity's znode
and its /config/changes notification in one transaction). Every answer is recorded for the
invariants (`World.on_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.config.config_admin import (
    AlterConfigError,
    altered_broker_defaults,
    altered_topic_config,
)
from controller.core import (
    AlterReassignmentsReply,
    ControllerEvent,
    ElectLeadersReply,
    ElectLeadersRequested,
    ReassignmentsRequested,
)
from controller.leading import Reply
from controller.zk_configs import (
    TOPICS,
    ConfigChangedError,
    get_entity_config,
    set_entity_config,
)
from controller.zk_topics import (
    TopicExistsError,
    UnknownTopicError,
    create_topic,
    mark_topic_for_deletion,
)
from controller.zk_types import ZkError
from protocol.messages.elect_leaders import ElectionType
from protocol.messages.incremental_alter_configs import AlterableConfig
from protocol.topic_partition import TopicPartition
from tests.simulation.controller_shell import ControllerAsk
from tests.simulation.network import CLIENT_NODE
from tests.simulation.world import World

__all__ = ["Operator"]

_WRITE_ATTEMPTS = 5  # as broker/handlers/incremental_alter_configs.py


class Operator:
    def __init__(self, world: World, session: int) -> None:
        self.world = world
        self.session = session  # ZooKeeper, for topic creation and deletion
        self.replies: list[tuple[ControllerEvent, Reply | None]] = []

    def reassign(self, tp: TopicPartition, target: tuple[int, ...] | None) -> bool:
        return self._ask(ReassignmentsRequested({tp: target}))

    def elect(self, election_type: ElectionType, tps: tuple[TopicPartition, ...] | None) -> bool:
        return self._ask(ElectLeadersRequested(election_type, tps))

    def create_topic(self, topic: str, assignment: dict[int, tuple[int, ...]]) -> bool:
        return self._zk(create_topic(topic, assignment, {}))

    def delete_topic(self, topic: str) -> bool:
        return self._zk(mark_topic_for_deletion(topic))

    def alter_configs(
        self, entity_type: str, name: str, ops: Sequence[AlterableConfig]
    ) -> dict[str, str] | None:
        """IncrementalAlterConfigs of a topic's configs (TOPICS) or the cluster-wide broker
        defaults (BROKERS, "<default>"): the stored configs after `ops`, None if refused."""
        world = self.world
        for _attempt in range(_WRITE_ATTEMPTS):
            try:
                stored = world.zk.run(self.session, get_entity_config(entity_type, name))
                if entity_type == TOPICS:
                    config = altered_topic_config(stored.config, ops)
                else:
                    config = altered_broker_defaults(stored.config, ops, world.static_defaults)
                world.zk.run(
                    self.session, set_entity_config(entity_type, name, config, stored.version)
                )
            except ConfigChangedError:
                continue
            except (AlterConfigError, ZkError) as exc:
                world.trace(f"OPERATOR: refused: {exc}")
                return None
            return config
        return None

    def _zk(self, script: object) -> bool:
        try:
            self.world.zk.run(self.session, script)  # type: ignore[arg-type]
        except (ZkError, TopicExistsError, UnknownTopicError) as exc:
            self.world.trace(f"OPERATOR: refused: {exc}")
            return False
        return True

    def _ask(self, event: ControllerEvent) -> bool:
        """Send `event` to the controller ZooKeeper names; False if there is none."""
        controller = self.world.zk.controller
        if controller is None:
            return False

        def answered(reply: object) -> None:
            assert reply is None or isinstance(reply, ElectLeadersReply | AlterReassignmentsReply)
            self.replies.append((event, reply))

        self.world.net.request(
            CLIENT_NODE,
            controller[0],
            ControllerAsk(event),
            timeout_ms=self.world.config.request_timeout_ms,
            on_response=answered,
            on_timeout=lambda: None,
            label=f"{type(event).__name__} -> b{controller[0]}",
        )
        return True
