"""A broker's cores, built from its config: one function for both drivers, broker/main.py
(the trio shells) and the seeded simulator (tests/simulation/broker.py), so the simulation
runs the cores as a configured broker has them, not copies built its own way."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.broker_config import BrokerConfig
from broker.core.fetch_session import FetchSessionCache
from broker.core.follower import FetcherSettings
from broker.core.housekeeping import HousekeepingTask
from broker.core.isr import IsrCore, IsrSettings
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.manager import LogManager

__all__ = ["BrokerCores", "assemble", "broker_state", "fetcher_settings", "housekeeping_intervals"]


@dataclass(frozen=True, slots=True)
class BrokerCores:
    replica_manager: ReplicaManager
    state: BrokerState  # what the decisions read and change (ISR, fetch sessions, ...)
    fetcher_settings: FetcherSettings  # the followers' (broker.core.follower)
    housekeeping_intervals_ms: dict[HousekeepingTask, int]  # broker.core.housekeeping's


def assemble(
    config: BrokerConfig,
    log_manager: LogManager,
    now_ms: int,
    *,
    fetch_sessions: FetchSessionCache | None = None,
) -> BrokerCores:
    """The cores of broker `config.broker_id` over its (started) logs; `now_ms` is the
    monotonic clock the ISR core's timers run on. `fetch_sessions`: a cache other than
    max.incremental.fetch.session.cache.slots' (the simulation draws its own)."""
    replica_manager = ReplicaManager(config.broker_id, log_manager)
    return BrokerCores(
        replica_manager,
        broker_state(config, replica_manager, now_ms, fetch_sessions=fetch_sessions),
        fetcher_settings(config),
        housekeeping_intervals(config),
    )


def broker_state(
    config: BrokerConfig,
    replica_manager: ReplicaManager,
    now_ms: int,
    *,
    fetch_sessions: FetchSessionCache | None = None,
) -> BrokerState:
    settings = IsrSettings(
        config.replica_lag_time_max_ms,
        config.isr_change_propagation_blackout_ms,
        config.isr_change_propagation_max_delay_ms,
    )
    isr = IsrCore(replica_manager.broker_id, settings, now_ms)
    state = BrokerState(replica_manager, isr, config.min_insync_replicas)
    state.fetch_sessions = fetch_sessions or FetchSessionCache(
        config.max_incremental_fetch_session_cache_slots
    )
    return state


def fetcher_settings(config: BrokerConfig) -> FetcherSettings:
    return FetcherSettings(
        config.replica_fetch_max_bytes,
        config.replica_fetch_min_bytes,
        config.replica_fetch_wait_max_ms,
        config.replica_fetch_backoff_ms,
        config.request_timeout_ms,
    )


def housekeeping_intervals(config: BrokerConfig) -> dict[HousekeepingTask, int]:
    """Kafka's scheduled log tasks and their intervals (LogManager.startup)."""
    return {
        HousekeepingTask.RETENTION: config.log_retention_check_interval_ms,
        HousekeepingTask.FLUSH: config.log_flush_scheduler_interval_ms,
        HousekeepingTask.HIGH_WATERMARKS: config.replica_high_watermark_checkpoint_interval_ms,
        HousekeepingTask.RECOVERY_POINTS: config.log_flush_offset_checkpoint_interval_ms,
        HousekeepingTask.PRODUCER_EXPIRY: config.producer_id_expiration_check_interval_ms,
    }
