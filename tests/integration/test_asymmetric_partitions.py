"""Asymmetric network partitions: nftables rules (netfilter.py) cut one path, the rest stays up.

3 brokers in network namespaces, an RF=3 topic with min.insync.replicas=2 led by a broker
that is not the controller, an acks=all producer throughout. Cuts: (a) the controller from
ZooKeeper, (b) the leader from ZooKeeper, (c) the leader from its followers, (d) one-way loss
between the leader and a follower. While cut the ISR must be what Kafka's ZooKeeper mode
decides (each test says why); after healing whole again with the producer going; then every
acked record at its offset once and the replicas identical. Prints stall and heal times
(docs/reliability.md, "Asymmetric partitions").
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from protocol.errors import ErrorCode
from tests.chaos.workload import read_partition
from tests.integration import netfilter
from tests.integration.acked_workload import AckLog, produce_until
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.netfilter import Direction
from tests.integration.netns import NetnsBrokerProcess, NetworkLab, available, zookeeper_on_hub
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    PartitionState,
    ZkView,
    assert_agree_below_high_watermark,
    assert_epochs_increase,
    create_topic,
    high_watermark,
    log_end_offset,
    logged_events,
    produce_fails,
    wait_converged,
    wait_isr,
    wait_state,
    wait_whole,
    zk_view,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not available(), reason="network namespaces need root (ip netns)"),
    pytest.mark.skipif(not netfilter.available(), reason="nft (nftables) is not installed"),
]

LAG_MS = 2000
SESSION_MS = 4000
BROKER_PORT = 9092
PROGRESS = 30  # acks that show the producer is making progress


@dataclass(frozen=True)
class Roles:
    """The partition's leader, its other follower and the controller (the third replica)."""

    leader: int
    follower: int
    controller: int
    controller_epoch: int


@dataclass
class Lab:
    network: NetworkLab
    cluster: Cluster
    zk_port: int

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.network.address(i)}:{BROKER_PORT}" for i in (1, 2, 3))


@pytest.fixture(scope="module")
def network() -> Iterator[NetworkLab]:
    with NetworkLab(3) as lab:
        yield lab


@pytest.fixture(scope="module")
def hub_zookeeper(network: NetworkLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """ZooKeeper on the hub address, reachable from every namespace."""
    with zookeeper_on_hub(network, tmp_path_factory.mktemp("asym-zk")) as port:
        yield port


@pytest.fixture
def lab(network: NetworkLab, hub_zookeeper: int, tmp_path: Path) -> Iterator[Lab]:
    connect = f"{network.hub_address}:{hub_zookeeper}/highwater-asym-{uuid.uuid4().hex[:8]}"
    overrides = {
        **FAST_REPLICATION,
        "replica.lag.time.max.ms": str(LAG_MS),
        "zookeeper.session.timeout.ms": str(SESSION_MS),
    }
    cluster = Cluster(hub_zookeeper, tmp_path, 3, overrides)
    cluster.zookeeper_connect = connect
    cluster.brokers = {
        i: NetnsBrokerProcess(
            i,
            BROKER_PORT,
            tmp_path / f"broker-{i}",
            connect,
            overrides,
            host=network.address(i),
            namespace=network.namespace(i),
        )
        for i in (1, 2, 3)
    }
    cluster.start()
    try:
        yield Lab(network, cluster, hub_zookeeper)
    finally:
        for i in (1, 2, 3):
            netfilter.heal(network, i)
        cluster.stop()


async def _place_topic(lab: Lab, view: ZkView, topic: str) -> Roles:
    """Create the topic with the controller last in its assignment, so the leader (the
    preferred replica) is not the controller; wait for an ISR of three."""
    await wait_whole(lab.cluster, timeout_s=60)
    found = await view.controller()
    assert found is not None
    controller, epoch = found
    leader, follower = (b for b in (1, 2, 3) if b != controller)
    await create_topic(
        lab.cluster, topic, [[leader, follower, controller]], {"min.insync.replicas": "2"}
    )
    state = await wait_isr(lab.cluster, view, topic, 0, (1, 2, 3), timeout_s=30, leader=leader)
    now = await view.controller()
    if now is None or now[0] != controller:
        pytest.fail(f"the controller moved while the topic was created: {found} -> {now}")
    assert state.leader == leader
    return Roles(leader, follower, controller, epoch)


@dataclass
class Figures:
    """What a scenario measured, printed for docs/reliability.md."""

    scenario: str
    cut_s: float = 0.0  # from the rules' insertion to their removal
    isr_changed_s: float = 0.0  # from the cut until the ISR showed it
    stall_s: float = 0.0  # the producer's longest time without an ack during the cut
    isr_whole_s: float = 0.0  # from the rules' removal until the ISR was whole again
    progress_s: float = 0.0  # from the rules' removal until the next ack
    acked: int = 0
    acked_during_cut: int = 0

    @property
    def heal_s(self) -> float:
        return max(self.isr_whole_s, self.progress_s)

    def line(self) -> str:
        return (
            f"[{self.scenario}] cut {self.cut_s:.1f} s; ISR changed {self.isr_changed_s:.1f} s "
            f"after the cut; producer stalled {self.stall_s:.1f} s during the cut; healed in "
            f"{self.heal_s:.1f} s (ISR whole {self.isr_whole_s:.1f} s, producer on "
            f"{self.progress_s:.1f} s); {self.acked} acked ({self.acked_during_cut} during the "
            "cut), 0 lost"
        )


@asynccontextmanager
async def _producing(lab: Lab, topic: str) -> AsyncIterator[AckLog]:
    acks = AckLog()
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce_until, lab.bootstrap, topic, acks, stop)
        await acks.progress(PROGRESS, 30, "before the cut")
        yield acks
        stop.set()


async def _scenario(
    lab: Lab,
    scenario: str,
    topic: str,
    cut: Callable[[Roles], None],
    while_cut: Callable[[ZkView, Roles, AckLog], Awaitable[float]],
) -> Figures:
    """Place the topic, produce, cut (`cut`), check the cut state (`while_cut`, which returns
    how long the ISR took to show the cut), heal every namespace, wait for a whole ISR and
    producer progress, stop, then check the log. Returns the figures."""
    try:
        figures = await _run(lab, scenario, topic, cut, while_cut)
    except BaseException:
        for i in (1, 2, 3):
            print(f"--- nft ruleset of broker {i} ---\n{netfilter.rules(lab.network, i)}")
        print(lab.cluster.logs(tail_chars=12_000))
        raise
    print(figures.line())
    return figures


async def _run(
    lab: Lab,
    scenario: str,
    topic: str,
    cut: Callable[[Roles], None],
    while_cut: Callable[[ZkView, Roles, AckLog], Awaitable[float]],
) -> Figures:
    figures = Figures(scenario)
    async with zk_view(lab.cluster) as view:
        roles = await _place_topic(lab, view, topic)
        async with _producing(lab, topic) as acks:
            cut(roles)
            cut_at = trio.current_time()
            figures.isr_changed_s = await while_cut(view, roles, acks)
            for i in (1, 2, 3):
                netfilter.heal(lab.network, i)
            healed_at = trio.current_time()
            figures.cut_s = healed_at - cut_at
            figures.stall_s = acks.longest_stall(cut_at, healed_at)
            figures.acked_during_cut = acks.acked_after(cut_at)
            await wait_isr(lab.cluster, view, topic, 0, (1, 2, 3), timeout_s=60)
            figures.isr_whole_s = trio.current_time() - healed_at
            first = await acks.progress(PROGRESS, 60, "after healing", since=healed_at)
            figures.progress_s = first - healed_at
        figures.acked = len(acks)
        await _check_log(lab, view, topic, acks)
    return figures


async def _check_log(lab: Lab, view: ZkView, topic: str, acks: AckLog) -> None:
    """No acked record lost, none twice, in order; the replicas identical below the HW."""
    state = await view.partition_state(topic, 0)
    assert state is not None
    leader = lab.cluster.brokers[state.leader]

    async def settled() -> int | None:  # the producer has stopped: the HW reaches the LEO
        hw = await high_watermark(leader, topic, 0)
        leo = await log_end_offset(leader, topic, 0)
        return hw if hw is not None and hw == leo else None

    await eventually(settled, 30, "the HW to reach the leader's LEO")
    hw = await assert_agree_below_high_watermark(lab.cluster, view, topic, 0)
    ids = await wait_converged(list(lab.cluster.brokers.values()), topic, 0, hw)
    assert_epochs_increase(ids)
    stored = await read_partition(lab.bootstrap, topic, 0)
    assert len(stored) == hw
    offsets = [offset for offset, _ in acks.records]
    assert offsets == sorted(set(offsets)), "acks came in offset order, each offset once"
    for offset, value in acks.records:
        assert offset < len(stored) and stored[offset] == value, f"acked {value!r}@{offset} lost"
    assert len(set(stored)) == len(stored), "no record stored twice"


def _isr(state: PartitionState) -> tuple[int, ...]:
    return tuple(sorted(state.isr))


async def _still(
    view: ZkView, topic: str, predicate: Callable[[PartitionState], bool], what: str
) -> None:
    """Just before healing: the ISR the cut led to has not changed back on its own."""
    state = await view.partition_state(topic, 0)
    assert state is not None and predicate(state), f"{what} until the end of the cut: {state}"


@pytest.mark.timeout(90)
async def test_a_controller_cut_off_from_zookeeper_only(lab: Lab) -> None:
    """Kafka (ZooKeeper mode): the controller's session expires, which takes /controller and
    its /brokers/ids registration with it. Another broker wins the election (a higher
    controller epoch, which fences the old one's requests at every broker: KafkaController's
    STALE_CONTROLLER_EPOCH) and, seeing the old controller's broker gone, removes it from the
    ISR of the partition it follows (ReplicaStateMachine OfflineReplica). The leader keeps
    leading with the two others, so the producer goes on. After healing the old controller
    learns its session expired, resigns, registers again and catches up into the ISR."""
    topic = "cut-controller-zk"

    def cut(roles: Roles) -> None:
        netfilter.drop(lab.network, roles.controller, lab.network.hub_address, port=lab.zk_port)

    async def while_cut(view: ZkView, roles: Roles, acks: AckLog) -> float:
        start = trio.current_time()

        async def new_controller() -> tuple[int, int] | None:
            found = await view.controller()
            return found if found is not None and found[0] != roles.controller else None

        await eventually(new_controller, 30, "another broker to become controller")

        def without_it(s: PartitionState) -> bool:
            return s.leader == roles.leader and _isr(s) == tuple(
                sorted((roles.leader, roles.follower))
            )

        await wait_state(view, topic, 0, without_it, 30, f"broker {roles.controller} out of ISR")
        changed_s = trio.current_time() - start
        found = await view.controller()
        assert found is not None and found[1] > roles.controller_epoch
        await acks.progress(PROGRESS, 30, "with the old controller cut off from ZooKeeper")
        await _still(view, topic, without_it, f"broker {roles.controller} out of the ISR")
        return changed_s

    await _scenario(lab, "a: controller cut off from ZooKeeper", topic, cut, while_cut)


@pytest.mark.timeout(90)
async def test_b_leader_cut_off_from_zookeeper_only(lab: Lab) -> None:
    """Kafka (ZooKeeper mode): the leader's session expires; the controller sees the broker
    gone and elects the next live ISR member (PartitionLeaderElectionAlgorithms
    offlinePartitionLeaderElection), ISR = the two others, and tells the live brokers only.
    The old leader still believes it leads, but its followers now fetch from the new leader,
    so its HW cannot move, and its ISR shrink cannot be written (no ZooKeeper): whatever it
    appends is never acknowledged. The producer moves to the new leader once a metadata
    refresh reaches another broker. After healing the old leader registers again, becomes a
    follower, truncates and rejoins the ISR."""
    topic = "cut-leader-zk"

    def cut(roles: Roles) -> None:
        netfilter.drop(lab.network, roles.leader, lab.network.hub_address, port=lab.zk_port)

    async def while_cut(view: ZkView, roles: Roles, acks: AckLog) -> float:
        start = trio.current_time()
        zombie = lab.cluster.brokers[roles.leader]
        mark = len(zombie.log_text())

        def moved(s: PartitionState) -> bool:
            return s.leader == roles.follower and _isr(s) == tuple(
                sorted((roles.follower, roles.controller))
            )

        await wait_state(view, topic, 0, moved, 30, f"{roles.follower} leading without the old")
        changed_s = trio.current_time() - start
        elected_at = trio.current_time()

        # The producer reaches the new leader only once a metadata refresh goes to another
        # broker: the old one still names itself leader in its metadata (as a Kafka broker
        # does in ZooKeeper mode until it hears from the controller). Not required here; what
        # is required is that the old leader cannot commit: its ISR shrink cannot be written.
        async def moved_on_or_stuck() -> bool:
            return acks.acked_after(elected_at) >= PROGRESS or bool(
                logged_events(zombie, "isr write failed", since=mark, topic=topic)
            )

        await eventually(moved_on_or_stuck, 40, "producer progress or a failed ISR write")
        await _still(view, topic, moved, f"broker {roles.follower} leading without the old")
        return changed_s

    await _scenario(lab, "b: leader cut off from ZooKeeper", topic, cut, while_cut)


@pytest.mark.timeout(90)
async def test_c_leader_cut_off_from_its_followers_only(lab: Lab) -> None:
    """Kafka (ZooKeeper mode): the leader's session lives, so no one elects another leader.
    Its followers cannot fetch; after replica.lag.time.max.ms it shrinks the ISR to itself
    (Partition.maybeShrinkIsr, written to ZooKeeper, which it still reaches). The ISR is
    then below min.insync.replicas: acks=all produces are refused with NOT_ENOUGH_REPLICAS
    (Partition.appendRecordsToLeader) and nothing is acknowledged until the followers are
    back. After healing they catch up and the leader lets them back in (maybeExpandIsr)."""
    topic = "cut-leader-followers"

    def cut(roles: Roles) -> None:
        for peer in (roles.follower, roles.controller):
            netfilter.drop(lab.network, roles.leader, lab.network.address(peer))

    async def while_cut(view: ZkView, roles: Roles, acks: AckLog) -> float:
        start = trio.current_time()

        def alone(s: PartitionState) -> bool:
            return s.leader == roles.leader and s.isr == (roles.leader,)

        await wait_state(view, topic, 0, alone, 30, "ISR = the leader alone")
        changed_s = trio.current_time() - start
        shrunk_at = trio.current_time()
        error = await produce_fails(lab.cluster, topic, 0, b"probe", delivery_timeout_ms=3000)
        # The producer retries NOT_ENOUGH_REPLICAS (retriable) until its delivery timeout, then
        # names it as the last error, as Kafka's producer does.
        assert ErrorCode.NOT_ENOUGH_REPLICAS.name in str(error), error
        assert acks.acked_after(shrunk_at) == 0, "acked with the ISR below min.insync.replicas"
        await _still(view, topic, alone, "the leader alone in the ISR")
        return changed_s

    await _scenario(lab, "c: leader cut off from its followers", topic, cut, while_cut)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sender", ["leader", "follower"])
async def test_d_one_way_loss_between_leader_and_follower(lab: Lab, sender: str) -> None:
    """One broker's packets to one peer are dropped, the peer's packets still arrive: the
    leader's to a follower (its fetch responses are lost; its fetch requests still arrive)
    or the follower's to the leader (its fetch requests are lost). Kafka: either way the
    follower's fetch offset stops reaching the leader's log end, so after
    replica.lag.time.max.ms the leader drops it from the ISR (Partition.getOutOfSyncReplicas
    looks at lastCaughtUpTimeMs, not at requests received) and goes on with the other two;
    after healing it catches up and rejoins."""
    topic = f"one-way-from-{sender}"

    def cut(roles: Roles) -> None:
        host, peer = (
            (roles.leader, roles.follower) if sender == "leader" else (roles.follower, roles.leader)
        )
        netfilter.drop(lab.network, host, lab.network.address(peer), direction=Direction.OUT)

    async def while_cut(view: ZkView, roles: Roles, acks: AckLog) -> float:
        start = trio.current_time()

        def without_it(s: PartitionState) -> bool:
            return s.leader == roles.leader and _isr(s) == tuple(
                sorted((roles.leader, roles.controller))
            )

        await wait_state(view, topic, 0, without_it, 30, f"broker {roles.follower} out of ISR")
        changed_s = trio.current_time() - start
        await acks.progress(PROGRESS, 30, "with the ISR of two")
        await _still(view, topic, without_it, f"broker {roles.follower} out of the ISR")
        return changed_s

    await _scenario(lab, f"d: one-way loss, {sender} to peer", topic, cut, while_cut)
