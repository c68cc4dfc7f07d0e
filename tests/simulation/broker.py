"""One simulated broker process: the broker's cores (broker.core) driven by simulated time.

The glue only does what trio, sockets and kazoo do for the real broker, in parts: requests
delivered to the same core functions the handlers call (broker_requests.py), the authorizer
and ACL admin (broker_acls.py), the upkeep the broker's background tasks do (followers, ISR
writes, cleaner, offline logs, housekeeping, dynamic configs: broker_upkeep.py), on state and
views every part reads (broker_base.py). This file is the process: start, crash, stop and
controlled shutdown, ZooKeeper sessions and registration. A crash loses the process and
unflushed data; the log directory (segments, checkpoint files) survives and is recovered by
the real LogManager at the next start.
"""

from __future__ import annotations

import random
from typing import Literal, assert_never

from broker.assembly import assemble
from broker.core.cleaner_manager import CleanerManager
from broker.core.controlled_shutdown import Ask, ShutdownAttempts, Stop, Wait
from broker.core.fetch_session import FetchSessionCache
from broker.core.follower import FollowerSet
from broker.core.housekeeping import HousekeepingSchedule
from broker.log.manager import LogManager
from controller.core import ControlledShutdownReply, ControlledShutdownRequested
from controller.zk_acls import (
    ACL_CHANGES_PATHS,
)
from controller.zk_brokers import try_register
from controller.zk_data import CONFIG_CHANGES_PATH, BrokerRegistration
from controller.zk_types import WatchEvent
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from tests.simulation.broker_requests import SimBrokerRequests
from tests.simulation.controller_shell import ControllerAsk, campaign
from tests.simulation.disk import CrashCut, MirroredLog, crash
from tests.simulation.group_shell import SimGroupCoordinator

__all__ = ["SimBroker"]


class SimBroker(SimBrokerRequests):
    """One broker process: started, crashed, stopped cleanly or shut down under control; its
    ZooKeeper sessions and registration."""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """(Re)start the process: recover the logs, register in ZooKeeper, start timers."""
        assert not self.alive
        self.alive = True
        self.shutting_down = False
        self.incarnation += 1
        self._reset()
        world, config = self.world, self.world.config
        broker_config = world.broker_config(self.broker_id, self.data_dir)
        self.log_manager = LogManager(
            [self.data_dir], broker_config.log_config(), log_class=MirroredLog
        )
        self.log_manager.startup(self.wall_ms)
        # Few slots now and then, so sessions are evicted and clients start over. A random of
        # its own: the world's stream (network delays, faults) stays what the seed made it.
        sessions_rng = random.Random(world.seed * 1009 + self.broker_id * 31 + self.incarnation)
        slots = sessions_rng.choice((1, 2, 1000))  # Kafka's default is 1000
        sessions = FetchSessionCache(slots, lambda: sessions_rng.randrange(1, 2**31 - 1))
        cores = assemble(broker_config, self.log_manager, self.now_ms, fetch_sessions=sessions)
        cores.replica_manager.on_offline = self._offline_soon
        self.state = cores.state
        self.followers = FollowerSet(self.state, cores.fetcher_settings)
        world.trace(
            f"b{self.broker_id} started (incarnation {self.incarnation}); logs "
            + ", ".join(f"{tp}: LEO {log.log_end_offset}" for tp, log in sorted(self.logs.items()))
        )
        self._new_session()
        self.every(config.replica_lag_time_max_ms // 2, "isr-expiration", self._shrink_isrs)
        self.every(config.isr_change_propagation_interval_ms, "isr-propagation", self._propagate)
        self._housekeeping = HousekeepingSchedule.start(
            cores.housekeeping_intervals_ms, self.now_ms
        )
        self._schedule_housekeeping()
        self.after(world.draw(config.log_flush_interval_ms), "log-flush", self._flush_logs)
        if config.consumer_groups:
            self.groups = SimGroupCoordinator(self)
        self.cleaner = CleanerManager(self.log_manager.read_cleaned())
        if config.compacted_topic and self.broker_id % 3 != 0:  # some brokers clean
            self.every(world.draw(config.cleaner_interval_ms), "log-cleaner", self._clean)

    def crash(
        self, keep: Literal["random", "all", "flushed"] = "random", torn: bool | None = None
    ) -> dict[TopicPartition, CrashCut]:
        """Power loss (see disk.crash for `keep`; `torn` forces or forbids a torn tail):
        ZooKeeper notices only when the session times out."""
        assert self.alive and self.log_manager is not None
        config = self.world.config
        torn_probability = config.torn_tail_probability if torn is None else float(torn)
        cuts = {
            tp: crash(log, self.world.rng, torn_probability, keep=keep)
            for tp, log in sorted(self.logs.items())
        }
        self.log_manager.abandon()
        self.last_crash = cuts
        self.lost_data_in_last_crash = any(
            c.kept_offset < c.log_end_offset or c.torn_bytes for c in cuts.values()
        )
        self.crashes += 1
        self.last_crash_ms = self.now_ms
        self._end_process()
        session, self.session_id = self.session_id, None
        if session is not None:
            zk = self.world.zk
            self.world.scheduler.after(
                config.zk_session_timeout_ms,
                f"zk session of b{self.broker_id} expires",
                lambda: zk.expire_session(session),
            )
        for hook in self.world.on_crash:
            hook(self.broker_id)
        return cuts

    def stop(self) -> None:
        """A clean stop (after a controlled shutdown): flush, checkpoint, close the session."""
        assert self.alive and self.log_manager is not None and self.state is not None
        self.state.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown(self.wall_ms)
        self.lost_data_in_last_crash = False
        self.world.trace(f"b{self.broker_id} stopped cleanly")
        self._end_process()
        session, self.session_id = self.session_id, None
        if session is not None:
            self.world.zk.expire_session(session)  # closed: its nodes go at once

    def shut_down(self) -> None:
        """SIGTERM: ask the controller to move our leaderships away, as often and for as long
        as broker/core/controlled_shutdown.py says (broker/controlled_shutdown.py's loop),
        then stop cleanly either way."""
        assert self.state is not None
        self.shutting_down = True
        config = self.world.config
        attempts = ShutdownAttempts.start(
            self.now_ms,
            max_retries=config.controlled_shutdown_max_retries,
            retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
            timeout_ms=config.controlled_shutdown_timeout_ms,
        )
        self.shutdown_attempts = attempts
        self._shutdown_step(attempts)

    def _shutdown_step(self, attempts: ShutdownAttempts) -> None:
        step = attempts.next_step(self.now_ms, zk_connected=self.session_id is not None)
        match step:
            case Stop():
                self.world.trace(f"b{self.broker_id} controlled shutdown ends: {step.reason.value}")
                self.stop()
            case Wait(delay_ms):
                self.after(delay_ms, "controlled shutdown", lambda: self._shutdown_step(attempts))
            case Ask():
                self._ask_shutdown(attempts, step)
            case _:
                assert_never(step)

    def _ask_shutdown(self, attempts: ShutdownAttempts, step: Ask) -> None:
        """One attempt: the controller's answer, or none within the step's timeout."""
        assert self.state is not None
        event = ControlledShutdownRequested(self.broker_id, self.state.broker_epoch)
        incarnation, done = self.incarnation, [False]

        def answered(reply: object) -> None:
            if not self.alive or self.incarnation != incarnation or done[0]:
                return  # crashed meanwhile, or this attempt already ended
            done[0] = True
            if isinstance(reply, ControlledShutdownReply) and reply.error_code == ErrorCode.NONE:
                self.world.trace(f"b{self.broker_id} controlled shutdown accepted: {reply}")
                attempts.attempt_accepted()
            else:
                attempts.attempt_failed(self.now_ms)
            self._shutdown_step(attempts)

        controller = self.world.zk.controller
        if controller is None:
            answered(None)
        elif self.controller is not None and self.controller.active:
            self.controller.ask(event, answered)
            self.after(step.timeout_ms, "controlled shutdown times out", lambda: answered(None))
        else:
            self.world.net.request(
                self.broker_id,
                controller[0],
                ControllerAsk(event),
                timeout_ms=step.timeout_ms,
                on_response=answered,
                on_timeout=lambda: answered(None),
                label=f"ControlledShutdown b{self.broker_id}->b{controller[0]}",
            )

    def _end_process(self) -> None:
        self.alive = False
        self.incarnation += 1
        if self.controller is not None:
            self.controller.die()
        self._reset()

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        if self.log_manager is not None:
            self.log_manager.abandon()

    def expire_session(self, reconnect_ms: int | None = None) -> None:
        """ZooKeeper expired our session (not a crash): re-register with a new one, after
        ZooKeeper's latency or `reconnect_ms` (ZooKeeper unreachable until then); a
        controller resigns at once (it can no longer write anything)."""
        if self.session_id is None:
            return
        self.world.zk.expire_session(self.session_id)
        self.session_id = None
        if self.controller is not None:
            self.controller.resign("zookeeper session expired")
        if reconnect_ms is None:
            reconnect_ms = self.world.draw(self.world.config.zk_latency_ms)
        self.after(reconnect_ms, "new session", self._new_session)

    def _new_session(self) -> None:
        self.session_id = self.world.zk.open_session(self.broker_id)
        if self.world.config.authorizer:  # a new session has no watches: read them all again
            self._reload_acls()
        # Dynamic configs before registering: LeaderAndIsr must find them in place. Only
        # with `dynamic_configs` (every seed set has it; scripted scenarios do not): the
        # listener's watch deliveries draw from the world's random stream.
        if self.world.config.dynamic_configs:
            self._apply_config_changes(everything=True)
        self._register()

    def _register(self) -> None:
        """broker/registration.py: wait for a node left by an older session to expire."""
        assert self.state is not None
        registration = BrokerRegistration(
            "127.0.0.1",
            9090 + self.broker_id,
            None,
            self.now_ms,
            self.first_broker_epoch,
            offline_partitions=tuple(sorted(self.state.replica_manager.offline)),
        )
        epoch = self._zk_run(try_register(self.broker_id, registration, self.session_id))
        if epoch is None:
            retry_ms = self.world.config.broker_registration_retry_ms
            self.after(retry_ms, "register", self._register)
            return
        if self.first_broker_epoch is None:
            self.first_broker_epoch = epoch
        self.state.broker_epoch = epoch
        self.world.trace(f"b{self.broker_id} registered, broker epoch {epoch}")
        campaign(self.world, self)

    def on_watch(self, event: WatchEvent) -> None:
        """A ZooKeeper watch of our session fired (the ACL listener's, the controller's, or
        the candidate's)."""
        if event.path in ACL_CHANGES_PATHS and self.world.config.authorizer:
            self._reload_acls()
        elif event.path == CONFIG_CHANGES_PATH and self.world.config.dynamic_configs:
            self._apply_config_changes(everything=False)
        elif self.controller is not None:
            self.controller.enqueue(event)
        elif event.path == "/controller":
            campaign(self.world, self)
