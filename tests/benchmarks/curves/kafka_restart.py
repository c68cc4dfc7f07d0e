"""Apache Kafka 3.9's side of the restart curve (restart.py is Highwater's): the same topic
(8 partitions, RF=3, segment.bytes 256 MiB) filled by Kafka's own kafka-producer-perf-test
(acks=1, 256 KiB records) until a broker that is not the controller holds the target; every
replica in sync and its recovery-point-offset-checkpoint rewritten since; then SIGKILL and a
start with the same log dir and port. The steps are read off Kafka's own log lines
(server.log, log4j's "[%d]" stamps in local time); back in every ISR is polled from every
broker's Metadata (kafka_metadata.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from client.cli.zookeeper_server import find_java
from tests.benchmarks.curves import fill as filling
from tests.benchmarks.curves import kafka_metadata
from tests.benchmarks.curves.fill import data_bytes
from tests.benchmarks.curves.highwater_side import REPLICATION_FACTOR, SYNC_TIMEOUT_S
from tests.benchmarks.curves.kafka_log import count, lines_since, seconds_to
from tests.benchmarks.curves.kafka_side import OVERRIDES
from tests.benchmarks.curves.measure import wait_for
from tests.benchmarks.curves.restart import (
    BATCH_SIZE,
    PARTITIONS,
    PRODUCERS,
    RECORD_SIZE,
    SEGMENT_BYTES,
    TOPIC,
    RestartTimes,
    checkpointed_bytes,
)
from tests.benchmarks.kafka.cluster import QUIET, KafkaBroker, KafkaCluster
from tests.benchmarks.peers.kafka_tools import PRODUCER, java_command

# Kafka keeps its log in the page cache and its indexes in mmaps, off the heap; what the heap
# holds while filling is the requests in flight (1 MB produce batches, replica fetches of at
# most replica.fetch.response.max.bytes, 10 MiB) and while loading the logs' small objects.
# 512 MiB is ample for that and leaves the machine's memory to the page cache, where both
# systems' data lives, as kafka_side.py's heaps do.
HEAP = ("-Xms512m", "-Xmx512m")
ADMIN_TIMEOUT_S = 300.0
# A SIGKILLed broker's registration stays in ZooKeeper until its session expires
# (zookeeper.session.timeout.ms, 6 s here): Kafka's KafkaZkClient.registerBroker then fails
# the start ("Error while creating ephemeral at /brokers/ids/N, node already exists and owner
# ... does not match current session", then "Fatal error during KafkaServer startup") where
# Highwater's registration waits. The broker is started again at once, as a supervisor
# restarting it on failure would, until one start stays up.
START_ATTEMPTS = 5
# Kafka's lines for the steps (verified in a real 3.9.2 broker's server.log):
# LogManager at the end of loading every log dir, SocketServer once the broker takes
# requests, KafkaZkClient on writing /brokers/ids/N.
LOGS_LOADED = re.compile(r"Loaded \d+ logs in \d+ms")
LISTENING = re.compile(r"Enabling request processing")
REGISTERED = re.compile(r"Registered broker \d+ at path /brokers/ids/\d+")
RECOVERING_SEGMENT = re.compile(r"Recovering unflushed segment")


class KafkaRestart:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    def _admin(self) -> AdminClient:
        # Any: the stubs type the config's values as str | int | float, a logger included.
        config: dict[str, Any] = {"bootstrap.servers": self.cluster.bootstrap, "logger": QUIET}
        return AdminClient(config)

    def _live(self) -> list[KafkaBroker]:
        return [
            b
            for b in self.cluster.brokers.values()
            if b.process is not None and b.process.poll() is None
        ]

    @staticmethod
    def _exited(broker: KafkaBroker) -> bool:
        return broker.process is not None and broker.process.poll() is not None

    def data_dir(self, broker_id: int) -> Path:
        return self.cluster.brokers[broker_id].directory / "data"

    def controller_id(self) -> int:
        for broker in self._live():
            found = kafka_metadata.fetch("127.0.0.1", broker.port)
            if found is not None and found.controller_id in self.cluster.brokers:
                return found.controller_id
        raise RuntimeError("no Kafka broker names a controller")

    def create_topic(self) -> None:
        topic = NewTopic(
            TOPIC, PARTITIONS, REPLICATION_FACTOR, config={"segment.bytes": str(SEGMENT_BYTES)}
        )
        admin = self._admin()  # held until the answer: a collected client drops its requests
        for future in admin.create_topics([topic]).values():
            future.result(ADMIN_TIMEOUT_S)
        self.wait_in_sync()

    def _partitions_where(self, broker_id: int | None) -> bool:
        """Every live broker's Metadata: PARTITIONS partitions of TOPIC, each with `broker_id`
        in its ISR (None: every replica in its ISR)."""
        for broker in self._live():
            found = kafka_metadata.fetch("127.0.0.1", broker.port)
            if found is None:
                return False
            partitions = found.topics.get(TOPIC, ())
            if len(partitions) != PARTITIONS:
                return False
            for p in partitions:
                wanted = set(p.replicas) if broker_id is None else {broker_id}
                if not wanted <= set(p.isr):
                    return False
        return True

    def wait_in_sync(self) -> None:
        wait_for(
            lambda: self._partitions_where(None),
            SYNC_TIMEOUT_S,
            "Kafka: every replica in sync",
            every_s=0.5,
        )

    def fill(self, broker_id: int, target_bytes: int) -> int:
        """As restart.fill for Highwater, with kafka-producer-perf-test (acks=1, 256 KiB
        records, batch.size as Highwater's producers have it; the rest its defaults)."""
        data_dir = self.data_dir(broker_id)
        data_dirs = [self.data_dir(b) for b in self.cluster.brokers]

        def command(records: int) -> list[str]:
            args = [
                "--topic", TOPIC, "--num-records", str(records),
                "--record-size", str(RECORD_SIZE), "--throughput", "-1",
                "--producer-props", f"bootstrap.servers={self.cluster.bootstrap}", "acks=1",
                f"batch.size={BATCH_SIZE}",
            ]  # fmt: skip
            return java_command(find_java(), self.cluster.jars, PRODUCER, args)

        filling.fill(
            "Kafka",
            command,
            PRODUCERS,
            RECORD_SIZE,
            data_dirs,
            TOPIC,
            target_bytes,
            self.wait_in_sync,
        )
        return checkpointed_bytes(data_dir, f"Kafka broker {broker_id}")

    def restart_s(self, broker_id: int) -> tuple[RestartTimes, int, int]:
        """SIGKILL `broker_id`, start it again (with the same log dir and port); the seconds
        to each step, the starts it took and the segments it recovered."""
        broker = self.cluster.brokers[broker_id]
        assert broker.process is not None
        log = broker.directory / "server.log"
        size = data_bytes(self.data_dir(broker_id), TOPIC)
        since_kill = log.stat().st_size
        killed_at = time.time()
        broker.process.kill()
        broker.process.wait(10)
        starts = 0
        while True:
            starts += 1
            offset = log.stat().st_size  # the steps of the start that stays up
            broker.start(self.cluster.jars, self.cluster.overrides, self.cluster.heap)
            wait_for(
                lambda: self._exited(broker) or self._partitions_where(broker_id),
                SYNC_TIMEOUT_S,
                f"Kafka broker {broker_id} back in every ISR",
                every_s=0.2,
            )
            in_isr_s = time.time() - killed_at
            if not self._exited(broker):
                break
            if starts >= START_ATTEMPTS:
                raise RuntimeError(f"Kafka broker {broker_id} did not start\n{broker.log_tail()}")
        # The first start after the kill does the unclean recovery ("Loaded N logs ...
        # (unclean log dirs = ...)"); one that then fails to register shuts down cleanly, and
        # the next skips recovery ("clean shutdown file was found"): log recovery done is the
        # first such line since the kill, the other steps the lines of the start that stayed up.
        all_lines = lines_since(log, since_kill)
        lines = lines_since(log, offset)
        steps = {
            "logs loaded": seconds_to(all_lines, LOGS_LOADED, killed_at),
            "listening": seconds_to(lines, LISTENING, killed_at),
            "registered": seconds_to(lines, REGISTERED, killed_at),
        }
        missing = [name for name, took in steps.items() if took is None]
        assert not missing, f"Kafka broker {broker_id} logged no {missing}"
        times = RestartTimes(
            listening_s=steps["listening"] or 0.0,
            registered_s=steps["registered"] or 0.0,
            logs_loaded_s=steps["logs loaded"] or 0.0,
            in_every_isr_s=in_isr_s,
            data_bytes=size,
        )
        return times, starts, count(all_lines, RECOVERING_SEGMENT)


@contextmanager
def running(root: Path) -> Iterator[KafkaRestart]:
    """ZooKeeper and 3 Kafka brokers under `root`; every process stopped on the way out."""
    cluster = KafkaCluster(root, OVERRIDES, heap=HEAP)
    try:
        cluster.start(timeout_s=180)
        yield KafkaRestart(cluster)
    finally:
        cluster.stop()
