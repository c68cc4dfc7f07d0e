"""`LeadingController`'s steps run against the simulated ZooKeeper (tests/simulation/zk.py):
what a step reads before the core decides."""

from __future__ import annotations

from controller.core import ControlledShutdownReply, ControlledShutdownRequested, ControllerContext
from controller.leading import LeadingController
from controller.zk_brokers import try_register
from controller.zk_controller_election import try_elect
from controller.zk_data import BrokerRegistration, PartitionStateZnode
from controller.zk_isr import ISR_CHANGE_NOTIFICATION_PATH, publish_isr_changes, write_isr
from controller.zk_topics import create_topic
from controller.zk_types import WatchEvent, WatchKind
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from tests.simulation.zk import SimZk

TP = TopicPartition("t", 0)


def test_a_controlled_shutdown_reads_the_isr_its_leader_wrote_but_has_not_published() -> None:
    """Simulation seed 1046 (operator seeds, brokers following /config/changes): the
    controller, itself shutting down, still had the ISR [3] of a partition it led, while the
    leader (itself) had written [1, 3, 4] and not yet published it (the notification is
    damped). Deciding on [3] it kept leading, with two live ISR members able to take over.
    Kafka reads the states from ZooKeeper before electing (ZkPartitionStateMachine.
    doElectLeaderForPartitions), and so does `serve`."""
    zk = SimZk()
    sessions = {b: zk.open_session(b) for b in (1, 2, 3)}
    epochs = {
        b: zk.run(s, try_register(b, BrokerRegistration(f"host{b}", 9090 + b), s))
        for b, s in sessions.items()
    }
    session = sessions[1]
    zk.run(session, create_topic(TP.topic, {TP.partition: (1, 2, 3)}, {}))
    won = zk.run(session, try_elect(1, session, 0))
    assert won is not None
    term = LeadingController(1, *won, ControllerContext(1))
    zk.run(session, term.load(0))
    assert term.context.partition_states[TP].isr == (1, 2, 3)

    # The leader (b1) shrinks its ISR to itself and publishes it: the controller takes it.
    found = zk.state(TP)
    assert found is not None
    znode, version = found
    shrunk = PartitionStateZnode(1, znode.leader_epoch, (1,), znode.controller_epoch)
    version = zk.run(session, write_isr(TP, shrunk, version))
    assert version is not None
    zk.run(session, publish_isr_changes([TP]))
    zk.run(session, term.on_watch(WatchEvent(WatchKind.CHILDREN, ISR_CHANGE_NOTIFICATION_PATH), 0))
    assert term.context.partition_states[TP].isr == (1,)
    # The followers catch up again: written, not yet published.
    grown = PartitionStateZnode(1, znode.leader_epoch, (1, 2, 3), znode.controller_epoch)
    assert zk.run(session, write_isr(TP, grown, version)) is not None

    reply = zk.run(session, term.serve(ControlledShutdownRequested(1, epochs[1] or -1), 0))

    assert reply == ControlledShutdownReply(1, ErrorCode.NONE, ())
    after = zk.state(TP)
    assert after is not None
    assert (after[0].leader, after[0].isr) == (2, (2, 3))
    assert term.context.partition_states[TP].leader == 2
