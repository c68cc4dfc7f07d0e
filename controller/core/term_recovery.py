"""What a controller term does when a step fails (Kafka's KafkaController on a
ControllerMovedException, a lost ZooKeeper race or session): a write that lost a race, or a
ZooKeeper failure, re-reads everything after a back-off that doubles while re-loads keep
failing; an epoch another broker moved resigns (deleting our /controller znode if it is still
ours); a /controller that is not ours, or a lost session, resigns. The trio shell
(controller/controller.py) and the simulator both ask `TermRecovery`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.zk_data import ZkDataError
from controller.zk_load import ResignNeeded
from controller.zk_types import ZkError
from controller.zk_writes import ControllerMovedError, ReloadNeeded

__all__ = ["RETRY_BACKOFF_MS", "Reload", "Resign", "TermRecovery"]

RETRY_BACKOFF_MS: Final = (100, 5_000)  # the first re-load's back-off, and the most


@dataclass(frozen=True, slots=True)
class Reload:
    """Re-read everything after `delay_ms`; a request being served is served again after."""

    delay_ms: int
    unexpected: bool  # a ZooKeeper failure, not a lost race: worth a warning


@dataclass(frozen=True, slots=True)
class Resign:
    reason: str
    delete_own_znode: bool  # the epoch moved: our /controller znode, if still there, goes


@dataclass(slots=True)
class TermRecovery:
    """One term's answer to its failed steps; `succeeded` after each step that did not fail."""

    backoff_ms: int = RETRY_BACKOFF_MS[0]

    def succeeded(self) -> None:
        self.backoff_ms = RETRY_BACKOFF_MS[0]

    def failed(self, exc: Exception) -> Reload | Resign | None:
        """What to do after `exc`; None: not a controller failure (the shell re-raises)."""
        if isinstance(exc, ControllerMovedError):
            return Resign("controller moved: another broker has a newer epoch", True)
        if isinstance(exc, ResignNeeded):
            return Resign("/controller is not ours, or the session is lost", False)
        if isinstance(exc, ReloadNeeded | ZkError | ZkDataError):
            delay_ms = self.backoff_ms
            self.backoff_ms = min(2 * self.backoff_ms, RETRY_BACKOFF_MS[1])
            return Reload(delay_ms, unexpected=not isinstance(exc, ReloadNeeded))
        return None
