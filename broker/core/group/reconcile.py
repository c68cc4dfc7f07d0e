"""A member's way to its target assignment (Kafka's CurrentAssignmentBuilder, KIP-848): it
first lets go of the partitions its target lacks (UNREVOKED_PARTITIONS, its epoch held
back), then gets the new ones that no other member owns (the others wait as
UNRELEASED_PARTITIONS, its epoch already the target's). So no partition ever has two owners."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from broker.core.group.model import Assignment, Member, MemberState

__all__ = ["reconcile"]


def reconcile(
    member: Member,
    target_epoch: int,
    target: Assignment,
    owned_by_others: Collection[object],
    reported: Assignment | None,
) -> Member:
    """The member's next state. `owned_by_others`: partitions other members own (assigned or
    being revoked); `reported`: what the member says it owns (None: not told this time)."""
    if member.state == MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    if member.state == MemberState.UNREVOKED_PARTITIONS and (
        reported is None or reported & member.pending_revocation
    ):
        return member  # still waiting for the member to let go
    current = member.assigned
    kept = current & target
    revoke = current - target
    wanted = target - current
    if revoke and (reported is None or reported & revoke):
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoke,
        )
    free = frozenset(tp for tp in wanted if tp not in owned_by_others)
    unreleased = bool(wanted - free)
    return replace(
        member,
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=kept | free,
        pending_revocation=frozenset(),
    )
