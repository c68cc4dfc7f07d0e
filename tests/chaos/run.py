"""One chaos run: ZooKeeper and N real brokers, the workload, the nemesis, then the checker.

    python -m tests.chaos.run --seed 7 --duration-s 60 --nemeses kill,pause,expire,bounce
    python -m tests.chaos.run --soak --seed 7     # an hour, overlapping faults, periodic checks

Prints the seed, the faults injected by kind, the send outcomes and the checker's anomaly table;
exits 1 on any anomaly, on replicas that disagree after healing, or on a consumer that met a log
truncation. The same seed picks the same faults, targets and timings (the cluster's own timing
still varies from run to run).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from client.errors import HighwaterClientError
from tests.chaos.checker import CheckReport, check, interim_check
from tests.chaos.group_checker import GroupReport, check_group
from tests.chaos.group_workload import GROUP, GroupHistory, run_group, sample_committed
from tests.chaos.nemesis import KINDS, Nemesis
from tests.chaos.progress import Progress
from tests.chaos.workload import History, consume, produce, read_partition
from tests.integration.cluster_harness import Cluster
from tests.integration.lossy_proxy import LossyProxy
from tests.integration.netns import NetnsBrokerProcess, NetworkLab
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    log_end_offset,
    wait_converged,
    wait_whole,
)

__all__ = ["ChaosConfig", "ChaosResult", "chaos_run", "main"]

TOPIC = "chaos"
NETNS_BROKER_PORT = 9092  # each broker has an address of its own in its namespace
SESSION_TIMEOUT_MS = 4000


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    duration_s: float = 30
    nemeses: tuple[str, ...] = ("kill", "pause", "expire", "bounce", "corrupt")
    brokers: int = 3
    partitions: int = 3
    producers: int = 2
    consumers: int = 2
    group_members: int = 2  # a consumer group that commits after processing; 0: none
    rate_per_s: float = 100  # per producer
    idempotent: bool = True
    # Each broker behind a LossyProxy (advertised to clients and peers): needed by lose-acks.
    lossy_links: bool = False
    # The nemesis's pace: the pause between steps, the share of steps that are two
    # overlapping faults, how long to wait for the cluster to be whole after a step.
    interval_s: tuple[float, float] = (1.0, 3.0)
    overlap_share: float = 0.0
    heal_timeout_s: float = 60
    check_every_s: float = 0  # periodic checks and a progress line (0: none)
    final_read_timeout_s: float = 60
    log_path: Path | None = None  # the nemesis's log, appended to as it goes


SOAK_NEMESES = ("kill", "pause", "expire", "bounce", "corrupt", "lose-acks", "reassign", "elect")


def soak_config(seed: int, *, duration_s: float = 3600, netns: bool = False) -> ChaosConfig:
    """`--soak`: an hour, a step every few seconds, 80% of them two overlapping faults,
    every nemesis (partition too with network namespaces), checks every 5 minutes."""
    return ChaosConfig(
        seed=seed,
        duration_s=duration_s,
        nemeses=(*SOAK_NEMESES, *(("partition",) if netns else ())),
        lossy_links=True,
        interval_s=(0.1, 0.4),
        overlap_share=0.8,
        heal_timeout_s=15,
        check_every_s=300,
        final_read_timeout_s=600,
    )


@dataclass
class ChaosResult:
    config: ChaosConfig
    report: CheckReport
    history: History
    faults: Counter[str] = field(default_factory=Counter)
    fault_log: list[str] = field(default_factory=list)
    replicas_agree: bool = True
    replica_problem: str = ""
    nemesis: Nemesis | None = None
    progress: Progress | None = None
    minutes: float = 0.0  # from the first fault's chance to the producers' stop
    end_problem: str = ""  # healing or the final read failed: only the interim checks ran
    group_report: GroupReport = field(default_factory=GroupReport)
    group_history: GroupHistory = field(default_factory=GroupHistory)

    @property
    def ok(self) -> bool:
        return (
            self.report.ok
            and self.group_report.ok
            and self.replicas_agree
            and not self.history.truncations
            and not (self.progress is not None and self.progress.problems)
            and not self.end_problem
        )

    def summary(self) -> str:
        c = self.config
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"
        total = sum(self.faults.values())
        lines = [
            f"chaos run: seed {c.seed}, {c.duration_s:g} s, {c.brokers} brokers, "
            f"{c.partitions} partitions RF={c.brokers} min.insync.replicas=2, "
            f"{c.producers} producers x {c.rate_per_s:g}/s "
            f"({'idempotent' if c.idempotent else 'NOT idempotent'}), {c.consumers} consumers",
            f"faults injected: {total} in {self.minutes:.1f} min: {faults}",
            *self._nemesis_lines(),
            f"sends: {self.report.acked} acked, {self.report.failed} failed, "
            f"{self.report.unknown} unknown; producer restarts {self.history.producer_restarts}",
            *(f"  producer stopped: {e[:300]}" for e in self.history.producer_errors[:5]),
            f"records: {self.report.final_records} in the final read, "
            f"{self.report.polled} polled by consumers",
            *([f"END FAILED: {self.end_problem}"] if self.end_problem else []),
            f"replicas identical after healing: {'yes' if self.replicas_agree else 'NO'} "
            f"{self.replica_problem}",
            f"consumer log truncations: {len(self.history.truncations)}",
            self.report.table(),
            *self._group_lines(),
            f"result: {'OK' if self.ok else 'ANOMALIES FOUND'} (seed {c.seed})",
        ]
        return "\n".join(lines)

    def _nemesis_lines(self) -> list[str]:
        n = self.nemesis
        if n is None:
            return []
        pairs = ", ".join(f"{k} {v}" for k, v in n.ledger.overlapping_pairs().items())
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(n.skipped.items()))
        lines = [
            f"overlapping faults (started while another was active): {n.ledger.overlapping}"
            + (f": {pairs}" if pairs else ""),
            f"steps {n.steps}, not whole within {n.heal_timeout_s:g} s after {n.unhealed}; "
            f"skipped (no target, or corrupt on a cluster missing a replica): {skipped or '0'}",
        ]
        p = self.progress
        if p is not None:
            lines.append(
                f"periodic checks: {p.checks}, {len(p.problems)} with anomalies; "
                f"peak disk {p.peak_disk_mb:.0f} MB"
            )
            lines += p.problems
        return lines

    def _group_lines(self) -> list[str]:
        if not self.config.group_members:
            return []
        g, r = self.group_history, self.group_report
        return [
            f"group {GROUP}: {self.config.group_members} members, {g.incarnations} "
            f"incarnations ({g.restarts} restarts), {r.processed} records processed, "
            f"{r.handovers} handovers, {r.lost} partitions lost by fenced members, "
            f"{g.commit_errors} failed commits, {len(g.committed)} committed-offset samples",
            r.table(),
        ]


async def chaos_run(
    config: ChaosConfig,
    zookeeper_port: int,
    directory: Path,
    *,
    lab: NetworkLab | None = None,
) -> ChaosResult:
    """With `lab`, each broker runs in its own network namespace (ZooKeeper must listen on
    the lab's hub address), and the `partition` nemesis can cut it off."""
    overrides = {
        **FAST_REPLICATION,
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "min.insync.replicas": "2",
        "controlled.shutdown.max.retries": "3",
        # The group's coordinator is one of three offsets partitions' leaders; members are
        # fenced after 6 s without a heartbeat (the nemesis's faults last longer).
        "offsets.topic.num.partitions": "3",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": "500",
    }
    brokers = range(1, config.brokers + 1)
    # Brokers in namespaces reach the proxies (and clients reach them) on the lab's hub.
    proxy_host = lab.hub_address if lab is not None else "127.0.0.1"
    proxy_ports = {b: free_port(proxy_host) for b in brokers} if config.lossy_links else {}
    advertised = {
        b: {"advertised.listeners": f"PLAINTEXT://{proxy_host}:{port}"}
        for b, port in proxy_ports.items()
    }
    cluster = Cluster(zookeeper_port, directory, config.brokers, overrides, advertised)
    if lab is not None:
        _move_into_namespaces(cluster, lab, zookeeper_port)
    rng = random.Random(config.seed)
    proxies = {
        b: LossyProxy(
            cluster.brokers[b].port,
            0.2,
            rng.randrange(1 << 31),
            arm_existing=True,
            listen_host=proxy_host,
            target_host=cluster.brokers[b].host,
        )
        for b in proxy_ports
    }
    nemesis = Nemesis(
        cluster,
        rng,
        config.nemeses,
        TOPIC,
        SESSION_TIMEOUT_MS,
        proxies=list(proxies.values()),
        partitions=config.partitions,
        lab=lab,
        interval_s=config.interval_s,
        overlap_share=config.overlap_share,
        heal_timeout_s=config.heal_timeout_s,
        log_path=config.log_path,
    )
    # Clients go where the brokers advertise: through the proxies when links are lossy.
    bootstrap = (
        ",".join(f"{proxy_host}:{port}" for port in proxy_ports.values()) or cluster.bootstrap
    )
    async with trio.open_nursery() as links:
        for b, proxy in proxies.items():
            await links.start(proxy.serve, proxy_ports[b])
        cluster.start()
        try:
            return await _run(config, cluster, nemesis, bootstrap, directory)
        finally:
            nemesis.heal()
            cluster.stop()
            links.cancel_scope.cancel()


async def _run(
    config: ChaosConfig, cluster: Cluster, nemesis: Nemesis, bootstrap: str, directory: Path
) -> ChaosResult:
    history = History()
    stop_producing, stop_consuming = trio.Event(), trio.Event()
    ends: dict[int, int] = {}  # per partition, where consumers must reach before stopping
    consumers_done = trio.Semaphore(0)

    async def consumer(i: int) -> None:
        await consume(bootstrap, TOPIC, config.partitions, i, history, stop_consuming, ends)
        consumers_done.release()

    async def producer(i: int) -> None:
        await produce(
            bootstrap,
            TOPIC,
            i,
            history,
            stop_producing,
            rate_per_s=config.rate_per_s,
            idempotent=config.idempotent,
        )

    await wait_whole(cluster, timeout_s=60)
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(
            TOPIC, partitions=config.partitions, replication_factor=config.brokers
        )
    group = GroupHistory()
    rng = random.Random(config.seed + 1)  # the group's restarts, apart from the nemesis's
    progress = Progress(config.check_every_s, directory) if config.check_every_s else None
    async with trio.open_nursery() as consumers:
        if progress is not None:
            consumers.start_soon(progress.run, nemesis, history, group)
        for i in range(config.consumers):
            consumers.start_soon(consumer, i)
        if config.group_members:
            consumers.start_soon(
                run_group, bootstrap, TOPIC, config.group_members, group, stop_producing, rng
            )
            consumers.start_soon(sample_committed, cluster.bootstrap, TOPIC, group)
        async with trio.open_nursery() as workload:
            for i in range(config.producers):
                workload.start_soon(producer, i)
            workload.start_soon(nemesis.run, stop_producing)
            began_s = trio.current_time()
            await trio.sleep(config.duration_s)
            stop_producing.set()
            minutes = (trio.current_time() - began_s) / 60
        nemesis.heal()
        try:
            final = await _heal_and_read(config, cluster, nemesis)
        except (AssertionError, HighwaterClientError, trio.TooSlowError) as exc:
            # Say what the run saw rather than lose an hour's history to a traceback.
            end_problem = f"healing or the final read failed: {exc!r}"
            final = {}
        else:
            end_problem = ""
        ends.update({p: len(v) for p, v in final.items()})
        stop_consuming.set()
        with trio.move_on_after(config.final_read_timeout_s):
            for _ in range(config.consumers):
                await consumers_done.acquire()
            if config.group_members:
                await _group_reached(group, ends)
        consumers.cancel_scope.cancel()
    end_s = trio.current_time()
    result = ChaosResult(config, CheckReport(), history, nemesis.faults, nemesis.log)
    result.nemesis, result.progress, result.minutes = nemesis, progress, minutes
    ran_to_end = range(config.consumers)
    if end_problem:
        result.end_problem = end_problem
        result.report = interim_check(history.sends, history.polls)
        return result
    result.report = check(history.sends, history.polls, final, consumers_ran_to_end=ran_to_end)
    if config.group_members:
        result.group_history = group
        result.group_report = check_group(
            group.ownership, group.processed, group.committed, final, end_s=end_s
        )
    await _compare_replicas(cluster, config, result)
    return result


async def _heal_and_read(
    config: ChaosConfig, cluster: Cluster, nemesis: Nemesis
) -> dict[int, list[bytes | None]]:
    """Whole again, every partition on every broker, then each partition read from 0."""
    await wait_whole(cluster, timeout_s=60)
    restored = await nemesis.restore()
    for r in restored:
        nemesis.note(f"restored: {r}")
    await wait_whole(cluster, timeout_s=60)
    return {
        p: await read_partition(cluster.bootstrap, TOPIC, p, timeout_s=config.final_read_timeout_s)
        for p in range(config.partitions)
    }


async def _group_reached(group: GroupHistory, ends: dict[int, int]) -> None:
    """Until the sampled committed offsets reach every partition's end."""
    while True:
        latest: dict[int, int] = {}
        for sample in group.committed:
            latest[sample.partition] = sample.offset
        if all(latest.get(p) == end for p, end in ends.items()):
            return
        await trio.sleep(0.2)


def _move_into_namespaces(cluster: Cluster, lab: NetworkLab, zookeeper_port: int) -> None:
    chroot = cluster.zookeeper_connect.split("/", 1)[1]
    cluster.zookeeper_connect = f"{lab.hub_address}:{zookeeper_port}/{chroot}"
    cluster.brokers = {
        b: NetnsBrokerProcess(
            b,
            NETNS_BROKER_PORT,
            broker.directory,
            cluster.zookeeper_connect,
            broker.overrides,
            host=lab.address(b),
            namespace=lab.namespace(b),
        )
        for b, broker in cluster.brokers.items()
    }


async def _compare_replicas(cluster: Cluster, config: ChaosConfig, result: ChaosResult) -> None:
    brokers = list(cluster.brokers.values())
    for partition in range(config.partitions):
        ends = {await log_end_offset(b, TOPIC, partition) for b in brokers}
        log_end = max((e for e in ends if e is not None), default=0)
        try:
            await wait_converged(brokers, TOPIC, partition, log_end, timeout_s=30)
        except AssertionError as exc:
            result.replicas_agree = False
            result.replica_problem += f"partition {partition}: {exc}; "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 31))
    parser.add_argument(
        "--soak",
        action="store_true",
        help="an hour (unless --duration-s), a step every 0.1-0.4 s plus healing, 80%% of "
        "them two overlapping faults, every nemesis (partition with --netns), lossy links, "
        "periodic checks every 5 minutes",
    )
    parser.add_argument("--duration-s", type=float, help="default 60, with --soak 3600")
    parser.add_argument(
        "--nemeses",
        help=f"any of {', '.join(KINDS)} (default kill,pause,expire,bounce,corrupt; "
        f"with --soak {','.join(SOAK_NEMESES)} and partition with --netns)",
    )
    parser.add_argument(
        "--check-every-s", type=float, help="periodic checks (default: none, --soak 300)"
    )
    parser.add_argument(
        "--log", type=Path, help="append the nemesis's log (every fault) here as it goes"
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument(
        "--group-members", type=int, default=2, help="consumer-group members (0: no group)"
    )
    parser.add_argument("--rate", type=float, default=100, help="records/s per producer")
    parser.add_argument("--no-idempotence", action="store_true")
    parser.add_argument(
        "--lossy-links", action="store_true", help="brokers behind LossyProxy (for lose-acks)"
    )
    parser.add_argument(
        "--netns", action="store_true", help="each broker in a network namespace (for partition)"
    )
    parser.add_argument("--dir", type=Path, help="keep the run's files here (default: a temp dir)")
    args = parser.parse_args(argv)
    base = (
        soak_config(args.seed, netns=args.netns)
        if args.soak
        else ChaosConfig(seed=args.seed, duration_s=60)
    )
    nemeses = tuple(n for n in args.nemeses.split(",") if n) if args.nemeses else base.nemeses
    unknown = sorted(set(nemeses) - set(KINDS))
    if unknown:
        parser.error(f"unknown nemeses {unknown}; known: {', '.join(KINDS)}")
    config = dataclasses.replace(
        base,
        duration_s=args.duration_s or base.duration_s,
        check_every_s=base.check_every_s if args.check_every_s is None else args.check_every_s,
        nemeses=nemeses,
        log_path=args.log,
        brokers=args.brokers,
        partitions=args.partitions,
        producers=args.producers,
        consumers=args.consumers,
        group_members=args.group_members,
        rate_per_s=args.rate,
        idempotent=not args.no_idempotence,
        lossy_links=args.lossy_links or "lose-acks" in nemeses,
    )
    print(
        f"chaos run: seed {config.seed}, {config.duration_s:g} s, nemeses {','.join(nemeses)}",
        file=sys.stderr,
        flush=True,
    )
    netns = args.netns or "partition" in nemeses
    with tempfile.TemporaryDirectory(prefix="highwater-chaos-") as tmp:
        directory = args.dir or Path(tmp)
        with contextlib.ExitStack() as stack:
            lab = stack.enter_context(NetworkLab(config.brokers)) if netns else None
            host = lab.hub_address if lab is not None else "127.0.0.1"
            zookeeper = ZooKeeperServer(directory / "zookeeper", free_port(host), host=host)
            zookeeper.start()
            stack.callback(zookeeper.stop)
            result = trio.run(
                partial(chaos_run, config, zookeeper.port, directory / "cluster", lab=lab)
            )
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
