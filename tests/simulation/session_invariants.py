"""Fetch sessions (KIP-227) in the simulation: after every step, a follower and the leader it
fetches from agree on what their session holds, whenever no fetch is in flight between them
and both still use it. Then an incremental fetch reads exactly the partitions the follower
wants, at the offsets it wants, and what the answer leaves out the follower does not miss.
`counts` says the seeds exercised it: incremental fetches, sessions refused or evicted.
"""

from __future__ import annotations

from collections import Counter

from tests.simulation.invariants import InvariantViolation
from tests.simulation.world import World

__all__ = ["SessionInvariants"]


class SessionInvariants:
    def __init__(self, world: World) -> None:
        self.world = world
        self.counts: Counter[str] = Counter()

    def check(self) -> None:
        brokers = self.world.brokers
        for follower_id, broker in brokers.items():
            if not broker.alive:
                continue
            for leader_id, fetcher in broker.fetchers.items():
                handler = fetcher.follower.session
                leader = brokers.get(leader_id)
                if fetcher.in_flight or not handler.incremental or leader is None:
                    continue
                if not leader.alive or leader.state is None:
                    continue
                session = leader.state.fetch_sessions.get(handler.session_id)
                if session is None or session.epoch != handler.epoch:
                    self.counts["sessions the next fetch will restart"] += 1
                    continue  # evicted, or the leader restarted: the next fetch is refused
                if session.replica_id != follower_id:
                    raise InvariantViolation(
                        f"b{leader_id} gave session {session.session_id} of b{session.replica_id}"
                        f" to b{follower_id}"
                    )
                held = {tp: cached.fetch for tp, cached in session.partitions.items()}
                if held != handler.session:
                    raise InvariantViolation(
                        f"fetch session {session.session_id} b{follower_id}->b{leader_id} at "
                        f"epoch {session.epoch}: the leader holds {sorted(held.items())}, the "
                        f"follower believes {sorted(handler.session.items())}"
                    )
                self.counts["agreeing session checks"] += 1
