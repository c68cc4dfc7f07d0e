"""ZooKeeper znode JSON: Kafka's exact layout, round trips, and malformed input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller import zk_data
from controller.zk_data import (
    BrokerRegistration,
    ClusterIdZnode,
    ControllerZnode,
    PartitionStateZnode,
    TopicAssignment,
    TopicConfigZnode,
    ZkDataError,
)
from protocol.messages.update_metadata import ListenerEndpoint
from protocol.topic_partition import TopicPartition


@pytest.mark.parametrize(
    ("znode", "expected_json"),
    [
        (
            BrokerRegistration("h", 9092, None, 17),
            {"version": 1, "host": "h", "port": 9092, "rack": None, "timestamp": "17"},
        ),
        (
            BrokerRegistration("h", 9092, "r1", 17, incarnation=5),
            {
                "version": 1,
                "host": "h",
                "port": 9092,
                "rack": "r1",
                "timestamp": "17",
                "incarnation": 5,
            },
        ),
        (
            BrokerRegistration(
                "h",
                9092,
                None,
                17,
                5,
                offline_partitions=(TopicPartition("a", 0), TopicPartition("t", 1)),
            ),
            {
                "version": 1,
                "host": "h",
                "port": 9092,
                "rack": None,
                "timestamp": "17",
                "incarnation": 5,
                "offline_partitions": [
                    {"topic": "a", "partition": 0},
                    {"topic": "t", "partition": 1},
                ],
            },
        ),
        (
            TopicAssignment({1: (2, 3), 0: (1, 2)}),
            {"version": 1, "partitions": {"0": [1, 2], "1": [2, 3]}},
        ),
        (TopicConfigZnode({"a": "b"}), {"version": 1, "config": {"a": "b"}}),
        (
            PartitionStateZnode(2, 5, (2, 3), 7),
            {"version": 1, "leader": 2, "leader_epoch": 5, "isr": [2, 3], "controller_epoch": 7},
        ),
        (ControllerZnode(3, 99), {"version": 1, "brokerid": 3, "timestamp": "99"}),
        (ClusterIdZnode("abc"), {"version": "1", "id": "abc"}),
    ],
)
def test_kafka_layout_and_round_trip(znode: Any, expected_json: dict[str, Any]) -> None:
    data = znode.encode()
    assert json.loads(data) == expected_json
    assert type(znode).decode(data) == znode


@pytest.mark.parametrize(
    ("cls", "data"),
    [
        (BrokerRegistration, b"not json"),
        (BrokerRegistration, b"[]"),
        (BrokerRegistration, b'{"host":"h","port":"9092","timestamp":"1"}'),
        (BrokerRegistration, b'{"host":"h","port":0,"timestamp":"1"}'),
        (BrokerRegistration, b'{"host":"h","port":1,"timestamp":"x"}'),
        (BrokerRegistration, b'{"host":"h","port":1,"timestamp":"1","incarnation":"5"}'),
        (BrokerRegistration, b'{"host":"h","port":1,"timestamp":"1","incarnation":true}'),
        (BrokerRegistration, b'{"host":"h","port":1,"timestamp":"1","incarnation":0}'),
        (BrokerRegistration, b'{"host":"h","port":1,"timestamp":"1","incarnation":null}'),
        (BrokerRegistration, b'{"host":"h","port":1,"timestamp":"1","offline_partitions":{}}'),
        (
            BrokerRegistration,
            b'{"host":"h","port":1,"timestamp":"1","offline_partitions":[{"topic":"t"}]}',
        ),
        (
            BrokerRegistration,
            b'{"host":"h","port":1,"timestamp":"1","offline_partitions":[["t",0]]}',
        ),
        (TopicAssignment, b'{"partitions":{"x":[1]}}'),
        (TopicAssignment, b'{"partitions":{"0":["1"]}}'),
        (TopicAssignment, b'{"partitions":[]}'),
        (TopicConfigZnode, b'{"config":{"a":1}}'),
        (PartitionStateZnode, b'{"leader":1,"leader_epoch":0,"isr":[1]}'),
        (PartitionStateZnode, b'{"leader":true,"leader_epoch":0,"isr":[1],"controller_epoch":1}'),
        (ControllerZnode, b'{"brokerid":"1"}'),
        (ClusterIdZnode, b'{"id":""}'),
        (BrokerRegistration, b"\xff"),
    ],
)
def test_malformed_znodes_raise_zk_data_error(cls: Any, data: bytes) -> None:
    with pytest.raises(ZkDataError):
        cls.decode(data)


def test_broker_registration_incarnation() -> None:
    """Absent (a first registration, or Kafka's own JSON): the znode's czxid. Present: the
    first registration's czxid, never taken above the znode's own."""
    kafka = b'{"version":1,"host":"h","port":9092,"rack":null,"timestamp":"17"}'
    first = BrokerRegistration.decode(kafka)
    assert first == BrokerRegistration("h", 9092, None, 17)
    assert first.incarnation is None and first.incarnation_of(40) == 40
    again = BrokerRegistration.decode(BrokerRegistration("h", 9092, None, 18, 40).encode())
    assert again.incarnation == 40 and again.incarnation_of(57) == 40
    assert BrokerRegistration("h", 9092, incarnation=60).incarnation_of(57) == 57


def test_broker_registration_keeps_listeners_and_offline_partitions() -> None:
    """A broker with named listeners and a failed log dir: the registration carries both."""
    endpoints = (
        ListenerEndpoint("INTERNAL", "PLAINTEXT", "h", 9092),
        ListenerEndpoint("EXTERNAL", "SASL_SSL", "::1", 9093),
    )
    offline = (TopicPartition("a", 0), TopicPartition("t", 1))
    registration = BrokerRegistration(
        "h", 9092, None, 17, 5, endpoints=endpoints, offline_partitions=offline
    )
    again = BrokerRegistration.decode(registration.encode())
    assert again.endpoints == endpoints and again.offline_partitions == offline
    assert again == registration


def test_log_dir_event_notification_is_kafkas() -> None:
    data = zk_data.encode_log_dir_event(3)
    assert json.loads(data) == {"version": 1, "broker": 3, "event": 1}
    assert zk_data.decode_log_dir_event(data) == 3
    for bad in (b'{"version":1,"broker":3,"event":2}', b'{"broker":"3","event":1}', b"x"):
        with pytest.raises(ZkDataError):
            zk_data.decode_log_dir_event(bad)


def test_controller_from_kafka_without_timestamp() -> None:
    assert ControllerZnode.decode(b'{"version":1,"brokerid":4}') == ControllerZnode(4, 0)


@pytest.mark.parametrize(("data", "epoch"), [(b"0", 0), (b"12", 12), (b" 3\n", 3)])
def test_controller_epoch(data: bytes, epoch: int) -> None:
    assert zk_data.decode_controller_epoch(data) == epoch
    assert zk_data.decode_controller_epoch(zk_data.encode_controller_epoch(epoch)) == epoch


@pytest.mark.parametrize("data", [b"", b"x", b"1.5", b"\xff"])
def test_bad_controller_epoch(data: bytes) -> None:
    with pytest.raises(ZkDataError):
        zk_data.decode_controller_epoch(data)


def test_paths() -> None:
    assert zk_data.broker_path(3) == "/brokers/ids/3"
    assert zk_data.topic_path("t") == "/brokers/topics/t"
    assert zk_data.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert zk_data.topic_config_path("t") == "/config/topics/t"
    assert zk_data.delete_topic_path("t") == "/admin/delete_topics/t"
