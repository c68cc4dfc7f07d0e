"""Config changes on a running broker (broker.config.dynamic_update): what a change of the
dynamic broker defaults or of a topic's configs changes where, and applying it to real logs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.dynamic_update import (
    BrokerDefaults,
    EntitiesToRead,
    PartitionConfig,
    apply_config_update,
    entities_to_read,
    open_log_configs,
    partition_config,
    plan_config_update,
    with_dynamic_defaults,
)
from broker.config.log_config import LogConfig
from broker.config.settings import SETTINGS
from broker.config.topic_config import TOPIC_SETTINGS
from broker.core.isr import IsrCore, IsrSettings
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from protocol.errors import HighwaterError
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition

ME = 1
NOW = 1_700_000_000_000
DAY_MS = 24 * 3600 * 1000
STATIC = BrokerDefaults(LogConfig(), 1, False)
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def test_every_topic_configs_broker_setting_is_dynamic() -> None:
    """Kafka's DynamicLogConfig: the broker names of the topic configs are cluster-wide."""
    dynamic = {s.key for s in SETTINGS if s.dynamic}
    assert {t.broker_key for t in TOPIC_SETTINGS.values() if t.broker_key} <= dynamic
    assert "producer.id.expiration.ms" in dynamic  # Kafka's DynamicProducerStateManagerConfig
    assert not {"broker.id", "log.dirs", "listeners", "log.retention.hours"} & dynamic


# --- the defaults ------------------------------------------------------------------------------


def test_dynamic_defaults_override_the_static_ones() -> None:
    defaults, skipped = with_dynamic_defaults(
        STATIC,
        {
            "log.retention.ms": "60000",
            "message.max.bytes": "2048",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "true",
        },
    )
    assert skipped == {}
    assert defaults.log_config == LogConfig(retention_ms=60000, max_message_bytes=2048)
    assert (defaults.min_insync_replicas, defaults.unclean_leader_election_enable) == (2, True)
    assert defaults.dynamic["log.retention.ms"] == 60000


def test_stored_defaults_that_are_not_valid_are_skipped_one_by_one() -> None:
    defaults, skipped = with_dynamic_defaults(
        STATIC,
        {
            "log.retention.ms": "soon",
            "log.dirs": "/elsewhere",
            "no.such.key": "1",
            "log.segment.bytes": "4096",
        },
    )
    assert set(skipped) == {"log.retention.ms", "log.dirs", "no.such.key"}
    assert "expected" in skipped["log.retention.ms"]
    assert defaults.log_config == LogConfig(segment_bytes=4096)


def test_no_dynamic_defaults_is_the_static_config() -> None:
    assert with_dynamic_defaults(STATIC, {}) == (STATIC, {})


# --- the plan ----------------------------------------------------------------------------------


def test_a_topic_change_reaches_each_of_its_logs_and_only_what_differs() -> None:
    current = {
        T0: PartitionConfig(LogConfig()),
        T1: PartitionConfig(LogConfig()),
    }
    update = plan_config_update(
        STATIC, {"t": {"retention.ms": "1000", "min.insync.replicas": "2"}}, current
    )
    wanted = PartitionConfig(LogConfig(retention_ms=1000), 2)
    assert update.changed == {T0: wanted, T1: wanted}
    assert update.retention_now == (T0, T1)  # lowered: checked at once
    assert update.problems == {}
    again = plan_config_update(STATIC, {"t": {"retention.ms": "1000", "min.insync.replicas": "2"}},
                               {T0: wanted})  # fmt: skip
    assert again.changed == {} and again.retention_now == ()


def test_raising_retention_or_changing_other_settings_needs_no_retention_check() -> None:
    current = {T0: PartitionConfig(LogConfig(retention_ms=1000, retention_bytes=10_000))}
    raised = {"retention.ms": "5000", "retention.bytes": "-1", "max.message.bytes": "99"}
    update = plan_config_update(STATIC, {"t": raised}, current)
    assert update.changed[T0].log_config == LogConfig(
        retention_ms=5000, retention_bytes=-1, max_message_bytes=99
    )
    assert update.retention_now == ()


@pytest.mark.parametrize(
    ("before", "after", "check"),
    [
        ({"retention.bytes": "-1"}, {"retention.bytes": "100"}, True),  # a limit where none was
        ({"retention.ms": "-1"}, {"retention.ms": "100"}, True),
        ({"retention.ms": "100"}, {"retention.ms": "-1"}, False),
        ({"retention.bytes": "500"}, {"retention.bytes": "499"}, True),
    ],
)
def test_retention_is_checked_at_once_when_a_limit_was_lowered(
    before: dict[str, str], after: dict[str, str], check: bool
) -> None:
    current = {T0: partition_config(LogConfig(), before)}
    assert plan_config_update(STATIC, {"t": after}, current).retention_now == (
        (T0,) if check else ()
    )


def test_a_defaults_change_reaches_logs_without_an_override_of_it() -> None:
    defaults, _ = with_dynamic_defaults(STATIC, {"log.retention.ms": "5000"})
    current = {T0: PartitionConfig(LogConfig()), U0: PartitionConfig(LogConfig(retention_ms=9))}
    update = plan_config_update(defaults, {"u": {"retention.ms": "9"}}, current)
    assert update.changed == {T0: PartitionConfig(LogConfig(retention_ms=5000))}  # u overrides
    assert update.retention_now == (T0,)
    assert update.defaults is defaults


def test_deleting_an_override_falls_back_to_the_default() -> None:
    current = {T0: PartitionConfig(LogConfig(segment_bytes=1024), 2)}
    update = plan_config_update(STATIC, {"t": {}}, current)
    assert update.changed == {T0: PartitionConfig(LogConfig(), None)}


def test_a_topic_whose_stored_configs_are_broken_keeps_what_it_has() -> None:
    current = {T0: PartitionConfig(LogConfig()), U0: PartitionConfig(LogConfig())}
    update = plan_config_update(
        STATIC, {"t": {"segment.bytes": "12"}, "u": {"retention.ms": "7"}}, current
    )
    assert set(update.problems) == {"t"}
    assert set(update.changed) == {U0}


# --- applying it to real logs ------------------------------------------------------------------


@pytest.fixture
def state(tmp_path: Path) -> Iterator[BrokerState]:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(NOW)
    replicas = ReplicaManager(ME, manager)
    isr = IsrCore(ME, IsrSettings(30_000, 5_000, 60_000), NOW)
    yield BrokerState(replicas, isr, min_insync_replicas=1)
    manager.shutdown(NOW)


def lead(state: BrokerState, tp: TopicPartition, overrides: dict[str, str]) -> None:
    leader_and_isr = LeaderAndIsrPartitionState(
        topic_name=tp.topic,
        partition_index=tp.partition,
        controller_epoch=1,
        leader=ME,
        leader_epoch=0,
        isr=(ME,),
        partition_epoch=0,
        replicas=(ME,),
    )
    state.replica_manager.become_leader_or_follower(
        (leader_and_isr,), NOW, {tp.topic: overrides}, wall_ms=NOW
    )


def append(state: BrokerState, tp: TopicPartition, size: int, timestamp_ms: int) -> int:
    batch = build_batch([Record(b"v" * size)], now_ms=timestamp_ms)
    result = state.replica_manager.append(tp, batch, timestamp_ms)
    return result.error_code


def test_lowered_retention_deletes_old_segments_at_once(state: BrokerState) -> None:
    lead(state, T0, {"segment.bytes": "1024"})
    for i in range(10):  # ten days old: several segments, all expired but the active one's
        append(state, T0, 400, NOW - 10 * DAY_MS + i)
    log = state.replica_manager.log_manager.logs[T0]
    assert len(log.segments) > 3 and log.log_start_offset == 0
    update = plan_config_update(
        STATIC, {"t": {"segment.bytes": "1024", "retention.ms": "3600000"}}, open_log_configs(state)
    )
    deleted = apply_config_update(state, update, NOW)
    assert deleted > 3
    assert log.log_start_offset == log.log_end_offset == 10  # every segment expired
    assert log.config.retention_ms == 3600000


def test_raised_max_message_bytes_lets_a_refused_batch_in(state: BrokerState) -> None:
    lead(state, T0, {"max.message.bytes": "200"})
    assert append(state, T0, 1000, NOW) == 10  # MESSAGE_TOO_LARGE
    update = plan_config_update(
        STATIC, {"t": {"max.message.bytes": "4096"}}, open_log_configs(state)
    )
    apply_config_update(state, update, NOW)
    assert append(state, T0, 1000, NOW) == 0


def test_min_insync_replicas_and_the_defaults_reach_the_broker(state: BrokerState) -> None:
    lead(state, T0, {})
    lead(state, U0, {"min.insync.replicas": "1"})
    defaults, _ = with_dynamic_defaults(
        STATIC, {"min.insync.replicas": "3", "message.max.bytes": "5"}
    )
    update = plan_config_update(defaults, {"t": {"min.insync.replicas": "2"}, "u": {}},
                                open_log_configs(state))  # fmt: skip
    apply_config_update(state, update, NOW)
    partitions = state.replica_manager.partitions
    assert partitions[T0].min_insync_replicas == 2
    assert partitions[U0].min_insync_replicas is None  # override deleted: the default, 3
    assert state.min_insync_replicas == 3
    assert state.replica_manager.log_manager.default_config.max_message_bytes == 5
    # A partition created later takes the new defaults.
    lead(state, T1, {})
    assert partitions[T1].log.config.max_message_bytes == 5


def test_the_active_segment_rolls_at_a_lowered_segment_bytes(state: BrokerState) -> None:
    lead(state, T0, {})
    append(state, T0, 2000, NOW)
    update = plan_config_update(STATIC, {"t": {"segment.bytes": "1024"}}, open_log_configs(state))
    apply_config_update(state, update, NOW)
    append(state, T0, 100, NOW)
    assert len(state.replica_manager.log_manager.logs[T0].segments) == 2


def test_open_logs_without_a_partition_are_planned_too(state: BrokerState) -> None:
    lead(state, T0, {})
    state.replica_manager.stop_replica(T0, delete=False)
    current = open_log_configs(state, {"t"})
    assert current == {T0: PartitionConfig(LogConfig(), None)}
    update = plan_config_update(STATIC, {"t": {"min.insync.replicas": "2"}}, current)
    apply_config_update(state, update, NOW)  # no partition to tell: no error
    with pytest.raises(HighwaterError):
        state.replica_manager.leader_partition(T0)


# -- what a round reads (the listener's decision, shared with the simulated brokers) ----------


def test_a_topic_notification_reads_only_that_topic_if_hosted() -> None:
    hosted = {"a", "b"}
    assert entities_to_read([("topics", "a")], hosted, everything=False) == EntitiesToRead(
        False, frozenset({"a"})
    )
    assert entities_to_read([("topics", "z")], hosted, everything=False) == EntitiesToRead(
        False, frozenset()
    )
    assert entities_to_read([("users", "a")], hosted, everything=False).topics == frozenset()


def test_a_change_of_the_defaults_reads_every_hosted_topic() -> None:
    read = entities_to_read([("brokers", "<default>")], {"a", "b"}, everything=False)
    assert read == EntitiesToRead(True, frozenset({"a", "b"}))
    assert entities_to_read([("brokers", "1")], {"a"}, everything=False).defaults is False


def test_everything_reads_the_defaults_and_every_hosted_topic() -> None:
    assert entities_to_read([], {"a"}, everything=True) == EntitiesToRead(True, frozenset({"a"}))
