"""The knobs of one simulated run: sizes, Kafka's intervals (scaled down), delays, fault rates.

Times are in simulated milliseconds. The defaults keep a seed fast (about a second of chaos)
while still exercising ISR shrink/expand, controller failover and crash recovery.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SimConfig"]

Range = tuple[int, int]  # inclusive bounds for a uniformly drawn value


@dataclass(frozen=True, slots=True)
class SimConfig:
    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False

    # Length of a run: steps of chaos (faults and produces), then a quiet period that must
    # end with every replica in sync and identical.
    chaos_steps: int = 1_000
    settle_ms_max: int = 30_000

    # Broker settings (Kafka's names, scaled down).
    replica_lag_time_max_ms: int = 1_000
    replica_fetch_wait_max_ms: int = 200
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes_choices: tuple[int, ...] = (700, 4_096, 1 << 20)
    replica_fetch_backoff_ms: int = 100
    request_timeout_ms: int = 1_000
    isr_change_propagation_interval_ms: int = 250
    isr_change_propagation_blackout_ms: int = 500
    isr_change_propagation_max_delay_ms: int = 6_000
    high_watermark_checkpoint_interval_ms: int = 500
    # The rest of the broker's housekeeping (broker/core/housekeeping.py), sped up.
    recovery_point_checkpoint_interval_ms: int = 1_000
    retention_check_interval_ms: int = 1_000
    producer_expiration_check_interval_ms: int = 1_000
    flush_scheduler_interval_ms: int = 1_000
    log_flush_interval_ms: Range = (200, 2_000)  # a log is fsynced now and then
    segment_bytes_choices: tuple[int, ...] = (600, 2_048, 1 << 20)

    # ZooKeeper and the controller.
    zk_session_timeout_ms: int = 600
    zk_latency_ms: Range = (1, 8)
    broker_registration_retry_ms: int = 100
    controller_event_delay_ms: Range = (1, 30)
    controller_slow_probability: float = 0.1  # an event waits behind a slow one
    controller_slow_delay_ms: Range = (200, 1_500)
    controller_channel_backoff_ms: Range = (50, 2_000)
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 200
    controlled_shutdown_timeout_ms: int = 5_000

    # Network between brokers.
    network_delay_ms: Range = (1, 12)
    drop_probability: float = 0.01

    # Producer.
    produce_interval_ms: Range = (15, 90)
    produce_timeout_ms: int = 1_500
    records_per_batch: Range = (1, 3)
    # The plain topic's batches from an idempotent producer (idempotence.py): producer id,
    # sequences, retries of the same bytes; its sequence errors and every new leader's
    # producer state are checked.
    idempotent_producer: bool = False

    # Nemesis.
    nemesis_interval_ms: Range = (100, 600)
    max_crashed_brokers: int = 2
    torn_tail_probability: float = 0.3
    # True: a broker that lost data in a crash is restarted only once the controller has
    # processed its departure (and there are no whole-cluster power outages). False (the
    # default): it may come back at once, so the controller sees a bounce, or a new
    # controller finds it restarted since the partition state was written.
    power_loss_restart_waits_for_controller: bool = False
    enable_producer: bool = True
    enable_nemesis: bool = True
    # Full disks among the faults (nemesis "fill disk" / "free disk").
    enable_disk_faults: bool = True
    # An operator at work among the faults: reassignments, preferred and unclean elections,
    # topics created and deleted, controlled shutdowns (see operator.py).
    enable_operator: bool = False
    # Dynamic config changes among the faults (nemesis "alter configs"): a topic's configs
    # or the cluster-wide broker defaults altered as IncrementalAlterConfigs does, applied by
    # every broker through its config change listener (config_invariants.py).
    dynamic_configs: bool = False
    # A second topic, "c", compacted: keyed writes (a few keys, some tombstones) and a log
    # cleaner on some brokers, cleaning now and then and swapping in a while later.
    compacted_topic: bool = False
    compact_keys: int = 5
    tombstone_probability: float = 0.15
    delete_retention_ms_choices: tuple[int, ...] = (300, 1 << 40)
    cleaner_interval_ms: Range = (50, 500)
    cleaning_time_ms: Range = (0, 150)
    # A consumer group on topic "t": members heartbeating and committing to the coordinator
    # (the same core as the broker's) on __consumer_offsets, with pauses and restarts of
    # their own (groups.py). Kafka's timeouts scaled down like the rest.
    consumer_groups: bool = False
    group_members: int = 3
    # Classic members (JoinGroup/SyncGroup/Heartbeat, classic_shell.py) in the same group,
    # alternately cooperative (cooperative-sticky) and eager (range).
    group_classic_members: int = 0
    offsets_partitions: int = 2
    group_session_timeout_ms: int = 400
    group_heartbeat_interval_ms: int = 60
    group_rebalance_timeout_ms: int = 1_000
    group_timer_interval_ms: int = 50
    group_load_ms: Range = (1, 100)
    group_commit_interval_ms: Range = (30, 150)
    group_fault_interval_ms: Range = (150, 700)
    group_pause_ms: Range = (50, 900)
    # An authorizer on every broker (acl_workload.py, auth_invariants.py): principals with
    # ACLs created and deleted among the faults, produces and consumer fetches as those
    # principals; no request is served without the permission it needs.
    authorizer: bool = False
    acl_change_interval_ms: Range = (20, 200)
    consumer_fetch_interval_ms: Range = (10, 80)
