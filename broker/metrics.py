"""The broker's Prometheus metrics, collected at scrape time from state the broker already keeps.

One `BrokerCollector` per broker, registered in the broker's own `CollectorRegistry`: each
scrape reads the replica manager's partitions, the ISR core's and the controller's counters,
the server's per-API figures (broker/request_stats.py), the purgatory, the fetchers, the
ZooKeeper session and the log manager, and builds the families then. Nothing on the request
path touches a prometheus object. Names are Kafka's JMX names in Prometheus style, prefixed
`highwater_`; docs/operations.md ("Metrics") maps each to its Kafka name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from broker.core.metadata_cache import NO_LEADER
from broker.purgatory import PURGATORY_KINDS
from broker.request_stats import TIME_KINDS
from controller.zk_types import SessionState
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.stats import Timings
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.http_listener import HttpListener
    from broker.server import BrokerServer

__all__ = [
    "MAX_QUOTA_SERIES",
    "PREFIX",
    "REQUEST_TIME_METRICS",
    "BrokerCollector",
    "GroupLag",
    "api_name",
    "error_name",
    "new_registry",
]

PREFIX = "highwater_"
MAX_QUOTA_SERIES = 100  # measured clients shown per quota type
# Each part of a request's time (request_stats.TIME_KINDS) -> its histogram's full name, as
# Kafka's RequestMetrics: TotalTimeMs, RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs, ...
REQUEST_TIME_METRICS = {
    "total": PREFIX + "network_request_total_time_seconds",
    "request": PREFIX + "network_request_queue_time_seconds",
    "local": PREFIX + "network_request_local_time_seconds",
    "remote": PREFIX + "network_request_remote_time_seconds",
    "send": PREFIX + "network_response_send_time_seconds",
}


@dataclass(frozen=True, slots=True)
class GroupLag:
    """One consumer group's lag on one partition (HW - committed offset)."""

    group: str
    topic: str
    partition: int
    lag: int


# Consumer-group lag: the broker's metrics listener sets `BrokerCollector.group_lag` to a
# function listing the lag of the groups this broker coordinates (broker/cluster_view.py);
# None: highwater_consumer_group_lag has no samples.
GroupLagSource = Callable[[], Iterable[GroupLag]]


def api_name(api_key: int) -> str:
    """Kafka's request name for an api key: PRODUCE -> Produce, LEADER_AND_ISR -> LeaderAndIsr."""
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def new_registry(
    ctx: BrokerContext, server: BrokerServer
) -> tuple[CollectorRegistry, BrokerCollector]:
    registry = CollectorRegistry(auto_describe=False)
    # The standard families every Prometheus client library exposes: process_* (CPU seconds,
    # resident memory, open and maximum file descriptors, start time) and python_* (garbage
    # collections, version), in this broker's registry rather than the library's global one.
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    collector = BrokerCollector(ctx, server)
    registry.register(collector)
    return registry, collector


def _histogram(family: HistogramMetricFamily, labels: list[str], timings: Timings) -> None:
    family.add_metric(
        labels, [(_le(bound), count) for bound, count in timings.cumulative()], timings.sum
    )


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class BrokerCollector(Collector):
    def __init__(self, ctx: BrokerContext, server: BrokerServer) -> None:
        self.ctx = ctx
        self.server = server
        self.group_lag: GroupLagSource | None = None
        self.http: HttpListener | None = None  # the listener serving these metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._broker()
        yield from self._replica_manager()
        yield from self._partitions()
        yield from self._controller()
        yield from self._requests()
        yield from self._network()
        yield from self._quotas()
        yield from self._fetchers()
        yield from self._zookeeper()
        yield from self._log()
        yield from self._groups()

    # -- the broker --------------------------------------------------------------------------

    def _broker(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            PREFIX + "broker_info",
            "This broker: its id and cluster id (always 1).",
            labels=["broker_id", "cluster_id"],
        )
        info.add_metric([str(self.ctx.broker_id), self.ctx.cluster_id or ""], 1)
        yield info

    def _replica_manager(self) -> Iterator[Metric]:
        state = self.ctx.state
        partitions = list(state.replica_manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = under_min = at_min = 0
        for p in leaders:
            if len(p.isr) < len(p.replicas):
                under += 1
            min_isr = p.min_insync_replicas or state.min_insync_replicas
            if len(p.isr) < min_isr:
                under_min += 1
            elif len(p.isr) == min_isr:
                at_min += 1
        rm = PREFIX + "replica_manager_"
        yield GaugeMetricFamily(
            rm + "under_replicated_partitions",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
            value=under,
        )
        yield GaugeMetricFamily(
            rm + "under_min_isr_partitions",
            "Partitions this broker leads with fewer in-sync replicas than min.insync.replicas.",
            value=under_min,
        )
        yield GaugeMetricFamily(
            rm + "at_min_isr_partitions",
            "Partitions this broker leads with exactly min.insync.replicas in-sync replicas.",
            value=at_min,
        )
        yield GaugeMetricFamily(
            rm + "leader_count", "Partitions this broker leads.", value=len(leaders)
        )
        yield GaugeMetricFamily(
            rm + "partition_count", "Partition replicas on this broker.", value=len(partitions)
        )
        isr = state.isr
        yield CounterMetricFamily(
            rm + "isr_shrinks", "ISRs this broker shrank (as leader).", value=isr.isr_shrinks
        )
        yield CounterMetricFamily(
            rm + "isr_expands", "ISRs this broker expanded (as leader).", value=isr.isr_expands
        )
        yield CounterMetricFamily(
            rm + "failed_isr_updates",
            "ISR writes that lost the compare-and-set or failed.",
            value=isr.failed_isr_updates,
        )
        producers = sum(
            len(log.producer_state.producers)
            for log in state.replica_manager.log_manager.logs.values()
        )
        yield GaugeMetricFamily(
            rm + "producer_id_count",
            "Idempotent producer ids tracked across this broker's logs.",
            value=producers,
        )

    def _partitions(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        leo = GaugeMetricFamily(
            PREFIX + "log_end_offset", "Log end offset of each replica here.", labels=labels
        )
        start = GaugeMetricFamily(
            PREFIX + "log_start_offset", "Log start offset of each replica here.", labels=labels
        )
        size = GaugeMetricFamily(
            PREFIX + "log_size_bytes", "Bytes on disk of each replica's log.", labels=labels
        )
        hw = GaugeMetricFamily(
            PREFIX + "partition_high_watermark",
            "High watermark of each replica here (a follower's trails its leader's).",
            labels=labels,
        )
        isr_count = GaugeMetricFamily(
            PREFIX + "partition_in_sync_replicas_count",
            "ISR size of each partition this broker leads.",
            labels=labels,
        )
        replicas_count = GaugeMetricFamily(
            PREFIX + "partition_replicas_count",
            "Replica count of each partition this broker leads.",
            labels=labels,
        )
        under = GaugeMetricFamily(
            PREFIX + "partition_under_replicated",
            "1 if a partition this broker leads is under-replicated, else 0.",
            labels=labels,
        )
        for tp, p in sorted(self.ctx.replica_manager.partitions.items()):
            values = [tp[0], str(tp[1])]
            leo.add_metric(values, p.log_end_offset)
            start.add_metric(values, p.log.log_start_offset)
            size.add_metric(values, p.log.size_bytes)
            hw.add_metric(values, p.high_watermark)
            if p.is_leader:
                isr_count.add_metric(values, len(p.isr))
                replicas_count.add_metric(values, len(p.replicas))
                under.add_metric(values, int(len(p.isr) < len(p.replicas)))
        yield from (leo, start, size, hw, isr_count, replicas_count, under)
        topic_labels = ["topic"]
        families = {
            "bytes_in": ("Bytes produced to partitions this broker leads.", "bytes_in"),
            "records_in": ("Records produced to partitions this broker leads.", "records_in"),
            "bytes_out": ("Bytes fetched by consumers from this broker.", "bytes_out"),
            "records_out": ("Offsets fetched by consumers from this broker.", "records_out"),
            "replication_bytes_in": (
                "Bytes this broker's followers fetched from leaders.",
                "replication_bytes_in",
            ),
            "replication_bytes_out": (
                "Bytes followers fetched from this broker.",
                "replication_bytes_out",
            ),
        }
        counters = sorted(self.ctx.replica_manager.topic_counters.items())
        for name, (doc, attr) in families.items():
            family = CounterMetricFamily(PREFIX + "broker_topic_" + name, doc, labels=topic_labels)
            for topic, c in counters:
                family.add_metric([topic], getattr(c, attr))
            yield family

    # -- the controller (only the active one reports non-zero) ------------------------------

    def _controller(self) -> Iterator[Metric]:
        controller = self.ctx.controller
        active = controller.is_active
        offline = imbalance = topics = partitions = epoch = 0
        stats = controller.stats
        unclean, elections = stats.unclean_leader_elections, stats.leader_elections
        election_time = stats.leader_election_time
        if active:
            context = controller.context
            epoch = context.controller_epoch
            topics = len(context.assignments)
            live = context.live_brokers
            for topic, assignment in context.assignments.items():
                for index, replicas in assignment.items():
                    partitions += 1
                    state = context.partition_states.get(TopicPartition(topic, index))
                    if state is None or state.leader == NO_LEADER or state.leader not in live:
                        offline += 1
                    elif replicas and state.leader != replicas[0]:
                        imbalance += 1
        c = PREFIX + "controller_"
        yield GaugeMetricFamily(
            c + "active_controller_count",
            "1 on the active controller, else 0 (exactly one broker 1 in a healthy cluster).",
            value=int(active),
        )
        yield GaugeMetricFamily(
            c + "offline_partitions_count", "Partitions without a live leader.", value=offline
        )
        yield GaugeMetricFamily(
            c + "preferred_replica_imbalance_count",
            "Partitions whose leader is not their preferred (first) replica.",
            value=imbalance,
        )
        yield GaugeMetricFamily(
            c + "epoch", "The controller epoch (active controller only).", value=epoch
        )
        yield GaugeMetricFamily(c + "global_topic_count", "Topics in the cluster.", value=topics)
        yield GaugeMetricFamily(
            c + "global_partition_count", "Partitions in the cluster.", value=partitions
        )
        yield CounterMetricFamily(
            c + "unclean_leader_elections",
            "Leaders elected from outside the ISR by this broker's controller terms.",
            value=unclean,
        )
        yield CounterMetricFamily(
            c + "leader_elections",
            "Partitions given a leader by this broker's controller terms.",
            value=elections,
        )
        family = HistogramMetricFamily(
            c + "leader_election_seconds",
            "Duration of each controller step that elected leaders (ZooKeeper writes included).",
        )
        _histogram(family, [], election_time)
        yield family

    # -- requests and connections -----------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        stats = self.server.request_stats
        by_api = sorted(stats.by_api.items()) if stats is not None else []
        n = PREFIX + "network_"
        requests = CounterMetricFamily(n + "requests", "Requests answered.", labels=["request"])
        request_bytes = CounterMetricFamily(
            n + "request_bytes", "Bytes of requests answered.", labels=["request"]
        )
        response_bytes = CounterMetricFamily(
            n + "response_bytes", "Bytes of responses sent.", labels=["request"]
        )
        errors = CounterMetricFamily(
            n + "errors",
            "Error codes in responses, per partition (NONE included), as Kafka's ErrorsPerSec.",
            labels=["request", "error"],
        )
        docs = {
            "total": "Total time of a request, from its frame read to its response written.",
            "request": "Time decoding the request (there is no request queue).",
            "local": "Time in the handler, less its waits in the purgatory.",
            "remote": "Time in the purgatory: acks=all waiting for followers, long polls.",
            "send": "Time encoding and writing the response.",
        }
        times = {
            kind: HistogramMetricFamily(REQUEST_TIME_METRICS[kind], docs[kind], labels=["request"])
            for kind in TIME_KINDS
        }
        for api_key, s in by_api:
            name = api_name(api_key)
            requests.add_metric([name], s.requests)
            request_bytes.add_metric([name], s.request_bytes)
            response_bytes.add_metric([name], s.response_bytes)
            for code, count in sorted(s.errors.items()):
                errors.add_metric([name, error_name(code)], count)
            for kind in TIME_KINDS:
                _histogram(times[kind], [name], s.times[kind])
        yield from (requests, request_bytes, response_bytes, errors, *times.values())
        purgatory = GaugeMetricFamily(
            PREFIX + "purgatory_size",
            "Requests parked in the purgatory, by kind (produce: acks=all, fetch: long polls, "
            "topic: admin requests and group writes, load: offsets partitions being loaded).",
            labels=["delayed_operation"],
        )
        for kind in PURGATORY_KINDS:
            purgatory.add_metric([kind], self.ctx.purgatory.waiting[kind])
        yield purgatory

    def _network(self) -> Iterator[Metric]:
        s = PREFIX + "socket_server_"
        server = self.server
        yield GaugeMetricFamily(
            s + "connections", "Open client connections.", value=server.connection_count
        )
        yield CounterMetricFamily(
            s + "connections_accepted", "Client connections accepted.", value=server.accepted
        )
        closed = CounterMetricFamily(
            s + "connections_closed_by_limit",
            "Connections closed by a limit: max.connections, a listener's or an address's "
            "max.connections, connections.max.idle.ms, or a client too slow to read its "
            "response.",
            labels=["reason"],
        )
        for reason, count in sorted(server.closed_by_limit.items()):
            closed.add_metric([reason], count)
        yield closed
        if self.http is not None:
            yield GaugeMetricFamily(
                PREFIX + "http_connections",
                "Open connections to this HTTP listener.",
                value=self.http.connection_count,
            )
            yield CounterMetricFamily(
                PREFIX + "http_connections_closed_by_limit",
                "HTTP connections closed at once: metrics.max.connections reached.",
                value=self.http.closed_by_limit,
            )

    def _quotas(self) -> Iterator[Metric]:
        """Kafka's per-client quota metrics (type=Produce|Fetch|Request, user, client-id):
        only clients with a quota are measured, and at most MAX_QUOTA_SERIES per quota type
        are shown (the highest rates), so a flood of client-ids cannot flood the scrape."""
        labels = ["quota_type", "user", "client_id"]
        rate = GaugeMetricFamily(
            PREFIX + "quota_rate",
            "A client's measured rate over the quota window: bytes/s for Produce and Fetch "
            "(Kafka's byte-rate), percent of a handler for Request (request-time).",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            PREFIX + "quota_limit", "The quota in force for that client.", labels=labels
        )
        throttle = CounterMetricFamily(
            PREFIX + "quota_throttle_time_ms",
            "Milliseconds of throttle time given to the client (Kafka's throttle-time).",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            PREFIX + "quota_throttled_requests",
            "Responses that carried a throttle time.",
            labels=labels,
        )
        now_ms = self.ctx.now_ms()
        for quota_type, manager in self.ctx.client_quotas.managers.items():
            measured = [
                (sensor.rate.rate_per_sec(now_ms), tags, sensor)
                for tags, sensor in manager.sensors(now_ms)
            ]
            measured.sort(key=lambda item: -item[0])
            for value, (user, client_id), sensor in measured[:MAX_QUOTA_SERIES]:
                names = [quota_type.metric_name, user, client_id]
                rate.add_metric(names, value)
                limit.add_metric(names, sensor.quota or 0.0)
                throttle.add_metric(names, sensor.throttle_time_ms_total)
                throttled.add_metric(names, sensor.throttled)
        yield from (rate, limit, throttle, throttled)
        yield CounterMetricFamily(
            PREFIX + "quota_muted_seconds",
            "Time connections spent muted for a throttle time (KIP-219), all clients.",
            value=self.server.throttled_s,
        )

    # -- followers, ZooKeeper, the log, groups ----------------------------------------------

    def _fetchers(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            PREFIX + "replica_fetcher_lag",
            "Records each followed partition is behind its leader's HW (last response).",
            labels=["topic", "partition"],
        )
        max_lag = 0
        partitions = self.ctx.replica_manager.partitions
        for tp, fetch_state in self.ctx.fetchers.followed():
            partition = partitions.get(tp)
            if partition is None or fetch_state.leader_high_watermark < 0:
                continue
            behind = max(0, fetch_state.leader_high_watermark - partition.log_end_offset)
            max_lag = max(max_lag, behind)
            lag.add_metric([tp[0], str(tp[1])], behind)
        yield GaugeMetricFamily(
            PREFIX + "replica_fetcher_max_lag",
            "The largest lag, in records, of any partition this broker follows.",
            value=max_lag,
        )
        yield lag

    def _zookeeper(self) -> Iterator[Metric]:
        zk = self.ctx.zk
        z = PREFIX + "zookeeper_"
        state = GaugeMetricFamily(
            z + "session_state", "1 for the session's current state.", labels=["state"]
        )
        current = zk.session_state  # NoZooKeeper's: LOST
        for s in SessionState:
            state.add_metric([s.value], int(s is current))
        yield state
        yield CounterMetricFamily(z + "disconnects", "Connection losses.", value=zk.disconnects)
        yield CounterMetricFamily(z + "expires", "Sessions expired.", value=zk.expirations)
        yield CounterMetricFamily(
            z + "reconnects", "Reconnections after a loss.", value=zk.reconnects
        )

    def _log(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(
            PREFIX + "log_flush_seconds", "Duration of each log flush (fsync)."
        )
        _histogram(family, [], self.ctx.replica_manager.log_manager.flush_timer)
        yield family

    def _groups(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            PREFIX + "consumer_group_lag",
            "Records a consumer group is behind the HW (HW - committed offset), per partition, "
            "for the groups this broker coordinates.",
            labels=["group", "topic", "partition"],
        )
        if self.group_lag is not None:
            for row in self.group_lag():
                family.add_metric([row.group, row.topic, str(row.partition)], row.lag)
        yield family
