"""Kafka's ZooKeeper layout: paths and the JSON (UTF-8) of every znode we use. Pure.

Decoders raise `ZkDataError` (a ValueError) on anything malformed, so a corrupt znode is a
clear error rather than a KeyError deep inside the controller. Past 500 lines: every znode's
format is here, beside the others, so that the layout can be read (and checked) in one file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.messages.update_metadata import ListenerEndpoint
from protocol.topic_id import parse_topic_id
from protocol.topic_partition import TopicPartition

__all__ = [
    "BROKER_IDS_PATH",
    "CLUSTER_ID_PATH",
    "CONFIG_BROKERS_PATH",
    "CONFIG_CHANGES_PATH",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_CLIENTS_PATH",
    "CONFIG_TOPICS_PATH",
    "CONFIG_USERS_PATH",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DEFAULT_BROKER_ENTITY",
    "DELETE_TOPICS_PATH",
    "INITIAL_CONTROLLER_EPOCH",
    "LOG_DIR_EVENT_NOTIFICATION_PATH",
    "LOG_DIR_EVENT_PREFIX",
    "LOG_DIR_FAILURE_EVENT",
    "MAX_LISTED_PARTITIONS",
    "REASSIGN_PARTITIONS_PATH",
    "TOPICS_PATH",
    "BrokerRegistration",
    "ClusterIdZnode",
    "ConfigChangeNotification",
    "ControllerZnode",
    "PartitionStateZnode",
    "ReassignmentPlan",
    "TopicAssignment",
    "TopicConfigZnode",
    "ZkDataError",
    "broker_config_path",
    "broker_path",
    "decode_controller_epoch",
    "decode_log_dir_event",
    "delete_topic_path",
    "encode_controller_epoch",
    "encode_log_dir_event",
    "partition_path",
    "partition_state_path",
    "partitions_path",
    "topic_config_path",
    "topic_path",
]

BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_BROKERS_PATH = "/config/brokers"
CONFIG_USERS_PATH = "/config/users"  # SCRAM credentials and quotas, one znode per user
CONFIG_CLIENTS_PATH = "/config/clients"  # client-id quotas, one znode per client-id
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"  # then ZooKeeper's 10-digit sequence number
DEFAULT_BROKER_ENTITY = "<default>"  # /config/brokers/<default>: the cluster-wide defaults
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
CLUSTER_ID_PATH = "/cluster/id"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler: the one event it knows
INITIAL_CONTROLLER_EPOCH = 0  # Kafka's: the first elected controller gets epoch 1
MAX_LISTED_PARTITIONS = 100_000  # a bound on lists of partitions read from a znode


class ZkDataError(ValueError):
    """A znode's content is not what Kafka's layout says it should be."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def broker_config_path(entity: str) -> str:
    """`/config/brokers/<entity>`: DEFAULT_BROKER_ENTITY, or a broker id."""
    return f"{CONFIG_BROKERS_PATH}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# --- JSON helpers -----------------------------------------------------------------------------


def _encode(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _decode_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{what}: not UTF-8 JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if type(value) is not int:
        raise ZkDataError(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def _int_list(obj: Mapping[str, Any], key: str, what: str) -> tuple[int, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or any(type(v) is not int for v in value):
        raise ZkDataError(f"{what}: {key!r} must be a list of integers, got {value!r}")
    return tuple(value)


def _timestamp(obj: Mapping[str, Any], what: str) -> int:
    value = obj.get("timestamp")
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ZkDataError(f"{what}: bad timestamp {value!r}")
    try:
        return int(value)  # Kafka writes it as a string of milliseconds
    except (TypeError, ValueError) as exc:
        raise ZkDataError(f"{what}: bad timestamp {value!r}") from exc


def _partitions(value: Any, what: str) -> tuple[TopicPartition, ...]:
    """A bounded list of {"topic": str, "partition": int} objects."""
    if not isinstance(value, list) or len(value) > MAX_LISTED_PARTITIONS:
        raise ZkDataError(f"{what}: not a list of at most {MAX_LISTED_PARTITIONS} partitions")
    out = []
    for item in value:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        if not isinstance(topic, str) or type(partition) is not int or partition < 0:
            raise ZkDataError(f"{what}: bad partition {item!r}")
        out.append(TopicPartition(topic, partition))
    return tuple(out)


_ENDPOINT = re.compile(r"([A-Za-z0-9_]+)://(?:\[([^\]]+)\]|([^:/\[\]]+)):([0-9]{1,5})")


def _endpoint_url(endpoint: ListenerEndpoint) -> str:
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.listener}://{host}:{endpoint.port}"


def _endpoints(obj: Mapping[str, Any], what: str) -> tuple[ListenerEndpoint, ...]:
    urls = obj.get("endpoints", [])
    protocols = obj.get("listener_security_protocol_map", {})
    if not isinstance(urls, list) or not isinstance(protocols, dict):
        raise ZkDataError(f"{what}: bad endpoints {urls!r}")
    endpoints = []
    for url in urls:
        match = _ENDPOINT.fullmatch(url) if isinstance(url, str) else None
        if match is None or not 0 < int(match[4]) < 65536:
            raise ZkDataError(f"{what}: bad endpoint {url!r}")
        listener = match[1]
        protocol = protocols.get(listener, listener)  # Kafka: the name, unmapped
        if not isinstance(protocol, str):
            raise ZkDataError(f"{what}: bad security protocol {protocol!r}")
        endpoints.append(ListenerEndpoint(listener, protocol, match[2] or match[3], int(match[4])))
    return tuple(endpoints)


# --- znodes -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """`/brokers/ids/<id>` (ephemeral). The broker epoch is the znode's czxid, not in the JSON.

    `incarnation` (our addition to Kafka's fields): the czxid of the first registration of
    the broker process that wrote this one. A process re-registering after its session
    expired writes it; a first registration leaves it out (None), meaning "this znode's
    czxid". It tells a process that merely lost its session (same incarnation, log intact)
    from one that restarted (a new incarnation, maybe without its unflushed data).

    `offline_partitions` (also ours): the replicas whose log or log dir failed in this
    process (KIP-112). The broker rewrites its registration when one fails, then publishes a
    log dir event (Kafka's `/log_dir_event_notification`); in Kafka the controller learns
    them from LeaderAndIsr responses instead.
    """

    host: str
    port: int
    rack: str | None = None
    timestamp_ms: int = 0
    incarnation: int | None = None
    # Every named listener (Kafka's v4 "endpoints" and "listener_security_protocol_map");
    # host and port above are the inter-broker listener's. Empty: that one only.
    endpoints: tuple[ListenerEndpoint, ...] = ()
    offline_partitions: tuple[TopicPartition, ...] = ()

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "version": 4 if self.endpoints else 1,
            "host": self.host,
            "port": self.port,
            "rack": self.rack,
            "timestamp": str(self.timestamp_ms),
        }
        if self.endpoints:
            obj["endpoints"] = [_endpoint_url(e) for e in self.endpoints]
            obj["listener_security_protocol_map"] = {
                e.listener: e.security_protocol for e in self.endpoints
            }
        if self.incarnation is not None:
            obj["incarnation"] = self.incarnation
        if self.offline_partitions:
            obj["offline_partitions"] = [
                {"topic": t, "partition": p} for t, p in sorted(set(self.offline_partitions))
            ]
        return _encode(obj)

    @classmethod
    def decode(cls, data: bytes) -> BrokerRegistration:
        what = "broker registration"
        obj = _decode_object(data, what)
        host = obj.get("host")
        if not isinstance(host, str) or not host:
            raise ZkDataError(f"{what}: bad host {host!r}")
        port = _int(obj, "port", what)
        if not 0 < port < 65536:
            raise ZkDataError(f"{what}: bad port {port}")
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkDataError(f"{what}: bad rack {rack!r}")
        incarnation = None
        if "incarnation" in obj:
            incarnation = _int(obj, "incarnation", what)
            if incarnation <= 0:  # a zxid
                raise ZkDataError(f"{what}: bad incarnation {incarnation}")
        endpoints = _endpoints(obj, what)
        offline = _partitions(obj.get("offline_partitions", []), f"{what}: offline_partitions")
        return cls(
            host,
            port,
            rack,
            _timestamp(obj, what),
            incarnation,
            endpoints=endpoints,
            offline_partitions=offline,
        )

    def incarnation_of(self, czxid: int) -> int:
        """The incarnation of the process that wrote this registration, whose znode has
        `czxid`. Never above `czxid`: a larger value cannot be a first registration of
        this process, so the znode's own czxid (a new process: the cautious reading)."""
        if self.incarnation is None:
            return czxid
        return min(self.incarnation, czxid)


def encode_log_dir_event(broker_id: int) -> bytes:
    """`/log_dir_event_notification/log_dir_event_<n>`, Kafka's JSON."""
    return _encode({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id a log dir event names."""
    what = "log dir event notification"
    obj = _decode_object(data, what)
    if obj.get("event") != LOG_DIR_FAILURE_EVENT:
        raise ZkDataError(f"{what}: unknown event {obj.get('event')!r}")
    return _int(obj, "broker", what)


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: partition -> replicas (order matters: the head is preferred),
    and the topic's id (KIP-516: Kafka's TopicZNode version 3 adds "topic_id"). None: a
    znode written before topic ids, which the controller backfills when elected."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"version": 1}
        if self.topic_id is not None:
            obj = {"version": 3, "topic_id": self.topic_id}
        obj["partitions"] = {str(p): list(r) for p, r in sorted(self.partitions.items())}
        return _encode(obj)

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        what = "topic assignment"
        obj = _decode_object(data, what)
        raw = obj.get("partitions")
        if not isinstance(raw, dict):
            raise ZkDataError(f"{what}: 'partitions' must be an object")
        partitions: dict[int, tuple[int, ...]] = {}
        for key, _replicas in raw.items():
            try:
                partition = int(key)
            except ValueError as exc:
                raise ZkDataError(f"{what}: bad partition id {key!r}") from exc
            if partition < 0:
                raise ZkDataError(f"{what}: negative partition id {partition}")
            partitions[partition] = _int_list(raw, key, what)
        topic_id = obj.get("topic_id")
        if topic_id is not None and not _is_topic_id(topic_id):
            raise ZkDataError(f"{what}: bad topic_id {topic_id!r}")
        return cls(dict(sorted(partitions.items())), topic_id)


def _is_topic_id(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    try:
        parse_topic_id(value)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class TopicConfigZnode:
    """`/config/topics/<t>`: topic-level config overrides; `/config/brokers/<default>` (the
    cluster-wide dynamic broker defaults) has the same layout."""

    config: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _encode({"version": 1, "config": dict(sorted(self.config.items()))})

    @classmethod
    def decode(cls, data: bytes) -> TopicConfigZnode:
        what = "topic config"
        obj = _decode_object(data, what)
        config = obj.get("config", {})
        if not isinstance(config, dict) or any(
            not isinstance(k, str) or not isinstance(v, str) for k, v in config.items()
        ):
            raise ZkDataError(f"{what}: 'config' must map strings to strings")
        return cls(config)


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """`/config/changes/config_change_<n>` (sequential): "the configs of this entity changed"
    (Kafka's version 2: `entity_path` is `topics/<t>`, `brokers/<default>`, `users/<name>`,
    `users/<name>/clients/<client-id>` or `clients/<client-id>`)."""

    entity_type: str  # "topics", "brokers", "users" or "clients"
    entity_name: str

    @property
    def entity_path(self) -> str:
        return f"{self.entity_type}/{self.entity_name}"

    def encode(self) -> bytes:
        return _encode({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def decode(cls, data: bytes) -> ConfigChangeNotification:
        what = "config change notification"
        obj = _decode_object(data, what)
        if obj.get("version") != 2:
            raise ZkDataError(f"{what}: unsupported version {obj.get('version')!r}")
        path = obj.get("entity_path")
        entity_type, slash, name = path.partition("/") if isinstance(path, str) else ("", "", "")
        if (
            entity_type not in ("topics", "brokers", "users", "clients")
            or not slash
            or not name
            or ("/" in name and not _user_client_name(entity_type, name))
        ):
            raise ZkDataError(f"{what}: bad entity_path {path!r}")
        return cls(entity_type, name)


def _user_client_name(entity_type: str, name: str) -> bool:
    """`<user>/clients/<client-id>`: a user's quota for one client-id (Kafka's nested entity)."""
    user, _, client = name.partition("/clients/")
    return entity_type == "users" and bool(user) and bool(client) and "/" not in user + client


@dataclass(frozen=True, slots=True)
class PartitionStateZnode:
    """`/brokers/topics/<t>/partitions/<p>/state`; the znode's version is the partition epoch."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def encode(self) -> bytes:
        return _encode(
            {
                "version": 1,
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "controller_epoch": self.controller_epoch,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> PartitionStateZnode:
        what = "partition state"
        obj = _decode_object(data, what)
        return cls(
            leader=_int(obj, "leader", what),
            leader_epoch=_int(obj, "leader_epoch", what),
            isr=_int_list(obj, "isr", what),
            controller_epoch=_int(obj, "controller_epoch", what),
        )


@dataclass(frozen=True, slots=True)
class ControllerZnode:
    """`/controller` (ephemeral): who the controller is."""

    broker_id: int
    timestamp_ms: int = 0

    def encode(self) -> bytes:
        return _encode(
            {"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp_ms)}
        )

    @classmethod
    def decode(cls, data: bytes) -> ControllerZnode:
        what = "controller znode"
        obj = _decode_object(data, what)
        timestamp = _timestamp(obj, what) if "timestamp" in obj else 0
        return cls(_int(obj, "brokerid", what), timestamp)


def encode_controller_epoch(epoch: int) -> bytes:
    """`/controller_epoch` holds the epoch as plain text."""
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        text = data.decode().strip()
        if not text.lstrip("-").isdigit():
            raise ValueError(text)
        return int(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"controller epoch: not an integer: {data!r}") from exc


@dataclass(frozen=True, slots=True)
class ClusterIdZnode:
    """`/cluster/id`: created once by the first broker."""

    cluster_id: str

    def encode(self) -> bytes:
        return _encode({"version": "1", "id": self.cluster_id})

    @classmethod
    def decode(cls, data: bytes) -> ClusterIdZnode:
        obj = _decode_object(data, "cluster id")
        cluster_id = obj.get("id")
        if not isinstance(cluster_id, str) or not cluster_id:
            raise ZkDataError(f"cluster id: bad id {cluster_id!r}")
        return cls(cluster_id)


@dataclass(frozen=True, slots=True)
class ReassignmentPlan:
    """`/admin/reassign_partitions`: Kafka's plan JSON, {"version":1,"partitions":[{"topic",
    "partition","replicas"}]}: the reassignments in progress and their target replicas.

    Highwater adds "original_replicas" to an entry once the controller started it: after a
    failover the new controller knows what to revert to on a cancel (Kafka keeps this in the
    topic znode's adding/removing replicas instead). Entries without it (a plan written by
    hand) start from the partition's current replicas. "throttle_bytes_per_sec" (Highwater's
    too) keeps the move's replication throttle across a failover (Kafka keeps it in dynamic
    configs)."""

    targets: Mapping[TopicPartition, tuple[int, ...]]
    originals: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    throttles: Mapping[TopicPartition, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        entries: list[dict[str, Any]] = []
        for (topic, partition), replicas in sorted(self.targets.items()):
            entry: dict[str, Any] = {
                "topic": topic,
                "partition": partition,
                "replicas": list(replicas),
            }
            original = self.originals.get(TopicPartition(topic, partition))
            if original is not None:
                entry["original_replicas"] = list(original)
            throttle = self.throttles.get(TopicPartition(topic, partition), -1)
            if throttle > 0:
                entry["throttle_bytes_per_sec"] = throttle
            entries.append(entry)
        return _encode({"version": 1, "partitions": entries})

    @classmethod
    def decode(cls, data: bytes) -> ReassignmentPlan:
        what = "reassignment plan"
        obj = _decode_object(data, what)
        raw = obj.get("partitions")
        if not isinstance(raw, list):
            raise ZkDataError(f"{what}: 'partitions' must be a list")
        targets: dict[TopicPartition, tuple[int, ...]] = {}
        originals: dict[TopicPartition, tuple[int, ...]] = {}
        throttles: dict[TopicPartition, int] = {}
        for entry in raw:
            if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
                raise ZkDataError(f"{what}: bad entry {entry!r}")
            tp = TopicPartition(entry["topic"], _int(entry, "partition", what))
            targets[tp] = _int_list(entry, "replicas", what)
            if not targets[tp] or len(set(targets[tp])) != len(targets[tp]):
                raise ZkDataError(f"{what}: bad replicas for {tp}: {list(targets[tp])}")
            if "original_replicas" in entry:
                originals[tp] = _int_list(entry, "original_replicas", what)
            if "throttle_bytes_per_sec" in entry:
                throttles[tp] = _int(entry, "throttle_bytes_per_sec", what)
        return cls(targets, originals, throttles)
