"""Random joins, heartbeats, leaves, topic growth and timeouts against the coordinator core,
with members that do what the answers say: no partition is ever owned by two members (as the
coordinator records it, and as live members believe it), and once the group goes quiet every
member reaches its target and the targets are balanced."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.group.model import GroupState
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from tests.unit.group.helpers import Shell, assigned


@dataclass
class Client:
    member_id: str = ""
    epoch: int = 0
    owned: frozenset[TopicPartition] = field(default_factory=frozenset)
    revoking: frozenset[TopicPartition] = field(default_factory=frozenset)  # until next beat
    live: bool = True
    last_ok_ms: int = 0  # its last answered heartbeat


SESSION_MS = 45_000  # a client not answered for this long takes its partitions as lost


def beat(shell: Shell, client: Client, now_ms: int) -> None:
    if not client.live:
        return
    # Revoked partitions are let go (committed, listener called) before this heartbeat says so.
    client.revoking = frozenset()
    response = shell.heartbeat("g", client.member_id, client.epoch, now_ms, owned=client.owned)
    if response.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
        client.live = False  # lost: it drops everything
        client.owned = frozenset()
        return
    assert response.error_code == ErrorCode.NONE, response
    client.last_ok_ms = now_ms
    client.member_id = response.member_id or client.member_id
    client.epoch = response.member_epoch
    new = assigned(response)
    if new is not None:  # new ones taken at once; revoked ones worked on until the next beat
        client.revoking = client.owned - new
        client.owned = new


def check(shell: Shell, clients: list[Client], now_ms: int) -> None:
    group = shell.core.groups.get("g")
    if group is None:
        return
    seen: dict[TopicPartition, str] = {}
    for member in group.members.values():
        for tp in member.owns():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {member.member_id}"
            seen[tp] = member.member_id
    believed: dict[TopicPartition, str] = {}
    for client in clients:
        if not client.live or now_ms - client.last_ok_ms >= SESSION_MS:
            continue
        for tp in client.owned | client.revoking:
            assert tp not in believed, f"{tp} believed owned twice"
            believed[tp] = client.member_id


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 0)),
        st.tuples(st.just("beat"), st.integers(0, 7)),
        st.tuples(st.just("leave"), st.integers(0, 7)),
        st.tuples(st.just("silence"), st.integers(0, 7)),
        st.tuples(st.just("grow"), st.integers(1, 3)),
        st.tuples(st.just("wait"), st.integers(1, 60_000)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_no_partition_has_two_owners_and_the_group_converges(ops: list[tuple[str, int]]) -> None:
    shell = Shell()
    shell.topics["t"] = 4
    clients: list[Client] = []
    now_ms = 0
    for op, n in ops:
        if op == "join" and len(clients) < 8:
            client = Client()
            clients.append(client)
            beat(shell, client, now_ms)
        elif op == "beat" and clients:
            beat(shell, clients[n % len(clients)], now_ms)
        elif op == "leave" and clients:
            client = clients[n % len(clients)]
            if client.live:
                shell.heartbeat("g", client.member_id, -1, now_ms)
                client.live, client.owned = False, frozenset()
        elif op == "silence" and clients:  # stops heartbeating: its session will run out
            client = clients[n % len(clients)]
            client.live = False
            # it keeps believing it owns its partitions: a zombie; not counted as live
        elif op == "grow":
            shell.topics["t"] += n
        elif op == "wait":
            now_ms += n
            for decision in shell.core.expire(now_ms, wall_ms=now_ms):
                shell.run(decision)
        check(shell, clients, now_ms)
    # Quiet: the live heartbeat every 10 s until the silent ones' sessions ran out and
    # nothing changes any more.
    live = [c for c in clients if c.live]
    for _ in range(2 * len(live) + 8):
        now_ms += 10_000
        for decision in shell.core.expire(now_ms, wall_ms=now_ms):
            shell.run(decision)
        for client in live:
            beat(shell, client, now_ms)
            check(shell, clients, now_ms)
    live = [c for c in live if c.live]
    group = shell.core.groups.get("g")
    if not live or group is None:
        return
    assert group.state == GroupState.STABLE, group
    counts = [len(c.owned) for c in live]
    assert max(counts) - min(counts) <= 1
    owned = frozenset().union(*(c.owned for c in live))
    assert owned == frozenset(TopicPartition("t", p) for p in range(shell.topics["t"]))
