"""A simulated broker's upkeep, as the trio broker's background tasks do it: actions a core
asked for (BrokerContext.apply), the followers' fetchers, ISR shrinks and their ZooKeeper
writes (broker/isr_manager.py), the log cleaner (broker/log_cleaner.py), offline logs
(broker/log_dir_failure.py, KIP-112), housekeeping and flushes, and dynamic configs
(broker/config/change_listener.py)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from broker.config.dynamic_update import (
    apply_config_update,
    entities_to_read,
    open_log_configs,
    plan_config_update,
    with_dynamic_defaults,
)
from broker.core.actions import Actions
from broker.core.cleaning_pass import CleaningOutcome, choose_cleaning, finish_cleaning
from broker.core.controller_requests import (
    FollowerChange,
)
from broker.core.isr import IsrWrite
from broker.core.log_dir_failure import take_offline
from broker.housekeeping import perform
from broker.log.cleaner import clean
from controller.zk_brokers import publish_log_dir_failure, set_offline_partitions
from controller.zk_configs import (
    BROKERS,
    TOPICS,
    get_entity_config,
    purge_expired_changes,
    read_config_changes,
)
from controller.zk_data import DEFAULT_BROKER_ENTITY
from controller.zk_isr import publish_isr_changes, write_isr
from controller.zk_types import ZkError
from protocol.errors import HighwaterError
from protocol.records import iter_batch_headers
from protocol.topic_partition import TopicPartition
from tests.simulation.broker_acls import SimBrokerAcls
from tests.simulation.fetcher import SimFetcher
from tests.simulation.invariants import InvariantViolation

__all__ = ["SimBrokerUpkeep"]


class SimBrokerUpkeep(SimBrokerAcls):
    """What the broker's background tasks do, each on what a core decided."""

    def apply(self, actions: Actions) -> None:
        """As BrokerContext.apply, in the same order."""
        self._change_followers(actions.follower_changes)
        self.purgatory.wake(actions.complete_keys)
        self._write_isr(actions.isr_writes)
        if actions.group_resync and self.groups is not None:
            self.groups.sync()

    # -- the followers ---------------------------------------------------------------------

    def _change_followers(self, changes: Iterable[FollowerChange]) -> None:
        assert self.followers is not None
        for change in changes:
            update = self.followers.apply(change)
            for follower in update.stopped:
                self.fetchers.pop(follower.leader.node_id).stopped = True
            if update.started is not None:
                fetcher = SimFetcher(self, update.started)
                self.fetchers[update.started.leader.node_id] = fetcher
                fetcher.wake(0)
            if update.woken is not None:
                self.fetchers[update.woken.leader.node_id].wake(0)

    # -- the ISR upkeep --------------------------------------------------------------------

    def _shrink_isrs(self) -> None:
        assert self.state is not None
        partitions = [p for _, p in sorted(self.partitions.items())]
        self._write_isr(self.state.isr.shrink(partitions, self.now_ms))

    def _write_isr(self, writes: Iterable[IsrWrite]) -> None:
        for write in writes:
            # IsrManager.start_write: its own task, so it may start a little later.
            delay_ms = self.world.rng.randint(0, 2)
            self.after(delay_ms, f"isr write {write.tp}", functools.partial(self._isr_write, write))

    def _isr_write(self, write: IsrWrite) -> None:
        """The CAS happens now; its answer arrives after ZooKeeper's latency."""
        assert self.state is not None
        if not self.state.isr.still_wanted(write, self.partitions.get(write.tp)):
            return
        version = self._zk_run(write_isr(write.tp, write.znode, write.expected_version))
        self.world.trace(
            f"b{self.broker_id} {write.tp}: isr write {list(write.znode.isr)} at pe "
            f"{write.expected_version}: " + ("lost" if version is None else f"pe {version}")
        )

        def done() -> None:
            assert self.state is not None
            partition = self.partitions.get(write.tp)
            if self.state.isr.written(write, partition, version, self.now_ms):
                self.purgatory.wake([write.tp])

        self.after(self.world.draw(self.world.config.zk_latency_ms), "isr write done", done)

    def _propagate(self) -> None:
        assert self.state is not None
        changed = self.state.isr.to_propagate(self.now_ms)
        if changed is not None:
            ok = self._zk_run(publish_isr_changes(changed)) is not None
            self.state.isr.propagated(changed, ok, self.now_ms)

    # -- the log cleaner (broker/log_cleaner.py) ---------------------------------------------

    def _clean(self) -> None:
        """The work is done now, on the files as they are; the swap comes a while later, as
        after a child process's run, so the log may have changed meanwhile."""
        assert self.state is not None
        chosen = choose_cleaning(self.cleaner, self.state.replica_manager, self.wall_ms)
        if chosen is None:
            return
        candidate, log = chosen
        tp = candidate.tp
        task = log.cleaning_task(
            candidate.first_dirty_offset, candidate.end_offset, self.wall_ms, 1 << 20
        )
        result = clean(task)

        def swap() -> None:
            assert self.state is not None
            manager = self.state.replica_manager
            outcome = finish_cleaning(self.cleaner, manager, tp, log, task, result, self.wall_ms)
            if outcome is CleaningOutcome.CLEANED:
                self.world.cleanings += 1
                self.world.trace(f"b{self.broker_id} cleaned {tp} below {result.end_offset}")

        self.after(self.world.draw(self.world.config.cleaning_time_ms), "cleaner swaps", swap)

    # -- offline logs (broker/log_dir_failure.py) ------------------------------------------

    def _offline_soon(self) -> None:
        """The replica manager's hook (called mid-request): handle it as the next event."""
        self.after(0, "log dir failure", self._log_dir_failed)

    def _log_dir_failed(self) -> None:
        """As broker/log_dir_failure.py: what the core decides, then tell the controller."""
        assert self.state is not None
        offline = take_offline(self.state.replica_manager)
        if offline is None:
            return
        for tp in offline.gone:
            self.offline_since.setdefault(tp, self.now_ms)
            self._check_no_torn_batch(tp)
        self.world.trace(f"b{self.broker_id} logs offline: {offline.gone}")
        self.apply(offline.actions)
        for hook in self.world.on_offline:
            hook(self.broker_id, offline.gone)
        registered = offline.registered
        self._zk_run(set_offline_partitions(self.broker_id, registered, self.session_id))
        self._zk_run(publish_log_dir_failure(self.broker_id))  # lost with the session: the
        # re-registration lists them

    def _check_no_torn_batch(self, tp: TopicPartition) -> None:
        """An offline log's files hold whole batches only: a write that ran out of space was
        cut again (the simulated disk itself never fails that)."""
        directory = self.data_dir / f"{tp[0]}-{tp[1]}"
        for path in sorted(directory.glob("*.log")):
            try:
                for _ in iter_batch_headers(path.read_bytes()):
                    pass
            except HighwaterError as exc:
                raise InvariantViolation(
                    f"b{self.broker_id} left a torn batch in {tp[0]}-{tp[1]}/{path.name}: {exc}"
                ) from exc

    def fill_disk(self) -> None:
        self.disk.full = True

    def free_disk(self) -> None:
        self.disk.full = False

    # -- housekeeping and flushes -----------------------------------------------------------

    def _schedule_housekeeping(self) -> None:
        """Kafka's scheduler, as the trio shell runs it (broker.main._housekeeping)."""
        self.after(
            self._housekeeping.next_due_ms() - self.now_ms, "housekeeping", self._run_housekeeping
        )

    def _run_housekeeping(self) -> None:
        assert self.log_manager is not None and self.state is not None
        for task in self._housekeeping.take_due(self.now_ms):
            perform(
                task,
                self.log_manager,
                self.state.replica_manager,
                wall_ms=self.wall_ms,
                monotonic_ms=self.now_ms,
            )
        self._schedule_housekeeping()

    def checkpoint(self) -> None:
        """The replication-offset-checkpoint (HWs)."""
        if self.state is not None:
            self.state.replica_manager.checkpoint_high_watermarks()

    def flush(self, *, hws: bool = True) -> None:
        """fsync every log, so the recovery points (and their checkpoint) move up; with
        `hws`, checkpoint the HWs too (a clean moment, for scripted tests)."""
        assert self.log_manager is not None
        for log in self.logs.values():
            log.flush()
        self.log_manager.checkpoint(self.wall_ms)
        if hws:
            self.checkpoint()

    def _flush_logs(self) -> None:
        """log.flush.interval: now and then the logs are fsynced."""
        self.flush(hws=False)
        config = self.world.config
        self.after(self.world.draw(config.log_flush_interval_ms), "log-flush", self._flush_logs)

    # -- dynamic configs (broker/config/change_listener.py) -------------------------------

    def _apply_config_changes(self, *, everything: bool) -> None:
        """One round of the config change listener: the notifications since the last one
        (re-arming the watch), the entities they name (every one: `everything`), and the
        change to the open logs the core plans. A round that loses the session stops; the
        next session reads everything."""
        assert self.state is not None
        zk = self.world.zk
        try:
            changes = zk.run(
                self.session_id,
                read_config_changes(self._config_changes_seen, entities=not everything),
            )
            hosted = {tp.topic for tp in self.logs}
            to_read = entities_to_read(changes.entities, hosted, everything=everything)
            if to_read.defaults:
                stored = zk.run(self.session_id, get_entity_config(BROKERS, DEFAULT_BROKER_ENTITY))
                self.config_defaults, skipped = with_dynamic_defaults(
                    self.world.static_defaults, stored.config
                )
                assert not skipped, f"the operator stored dynamic defaults refused: {skipped}"
            topic_configs = {
                topic: zk.run(self.session_id, get_entity_config(TOPICS, topic)).config
                for topic in sorted(to_read.topics)
            }
        except ZkError:
            return
        current = open_log_configs(self.state, to_read.topics)
        update = plan_config_update(self.config_defaults, topic_configs, current)
        assert not update.problems, f"stored topic configs refused: {update.problems}"
        deleted = apply_config_update(self.state, update, self.wall_ms)
        self._config_changes_seen = changes.last
        if changes.entities or update.changed:
            self.world.trace(
                f"b{self.broker_id} applied config changes "
                f"{['/'.join(e) for e in changes.entities]}: {len(update.changed)} logs changed, "
                f"{deleted} segments deleted"
            )
        self._zk_run(purge_expired_changes(changes.children, self.wall_ms))
