"""controller.core.term_recovery: a lost race or a ZooKeeper failure re-loads after a back-off
that doubles up to its bound and resets after a step that succeeds; a moved epoch or a
/controller that is not ours resigns."""

from __future__ import annotations

from controller.core.term_recovery import RETRY_BACKOFF_MS, Reload, Resign, TermRecovery
from controller.zk_data import ZkDataError
from controller.zk_load import ResignNeeded
from controller.zk_types import ZkError
from controller.zk_writes import ControllerMovedError, ReloadNeeded


def test_re_loads_back_off_doubling_to_the_bound_and_reset_after_a_success() -> None:
    recovery = TermRecovery()
    delays = []
    for _ in range(10):
        step = recovery.failed(ReloadNeeded())
        assert isinstance(step, Reload)
        delays.append(step.delay_ms)
    assert delays[:3] == [RETRY_BACKOFF_MS[0], 2 * RETRY_BACKOFF_MS[0], 4 * RETRY_BACKOFF_MS[0]]
    assert max(delays) == delays[-1] == RETRY_BACKOFF_MS[1]
    recovery.succeeded()
    assert recovery.failed(ReloadNeeded()) == Reload(RETRY_BACKOFF_MS[0], unexpected=False)


def test_a_zookeeper_failure_re_loads_and_is_worth_a_warning() -> None:
    for exc in (ZkError("connection loss"), ZkDataError("bad json")):
        step = TermRecovery().failed(exc)
        assert step == Reload(RETRY_BACKOFF_MS[0], unexpected=True)


def test_a_moved_epoch_resigns_deleting_our_znode_and_a_foreign_one_just_resigns() -> None:
    moved = TermRecovery().failed(ControllerMovedError("epoch 7 > 6"))
    assert isinstance(moved, Resign) and moved.delete_own_znode
    foreign = TermRecovery().failed(ResignNeeded())
    assert isinstance(foreign, Resign) and not foreign.delete_own_znode


def test_anything_else_is_not_a_controller_failure() -> None:
    assert TermRecovery().failed(ValueError("a bug")) is None
