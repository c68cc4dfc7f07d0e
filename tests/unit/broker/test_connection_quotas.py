"""The connection limits' decisions (broker.core.connection_quotas), without sockets."""

from __future__ import annotations

import pytest

from broker.core.connection_quotas import ConnectionLimits, ConnectionQuotas, Refusal

LISTENERS = ("CLIENT", "INTERNAL")


def quotas(**limits: object) -> ConnectionQuotas:
    return ConnectionQuotas(
        ConnectionLimits(inter_broker_listener="INTERNAL", **limits),  # type: ignore[arg-type]
        LISTENERS,
    )


def test_max_connections_counts_every_listener_but_never_refuses_the_inter_broker_one() -> None:
    q = quotas(max_connections=2)
    assert q.admit("CLIENT", "10.0.0.1") is None
    assert q.admit("INTERNAL", "10.0.0.2") is None
    assert q.admit("CLIENT", "10.0.0.3") is Refusal.MAX_CONNECTIONS  # the broker's counts both
    assert q.admit("INTERNAL", "10.0.0.2") is None  # KIP-402
    assert q.total == 3
    q.release("INTERNAL", "10.0.0.2")
    q.release("INTERNAL", "10.0.0.2")
    assert q.admit("CLIENT", "10.0.0.3") is None


def test_with_one_listener_nothing_is_exempt() -> None:
    q = ConnectionQuotas(
        ConnectionLimits(max_connections=1, inter_broker_listener="PLAINTEXT"), ("PLAINTEXT",)
    )
    assert q.protected is None
    assert q.admit("PLAINTEXT", "h") is None
    assert q.admit("PLAINTEXT", "h") is Refusal.MAX_CONNECTIONS


def test_per_ip_limit_and_overrides() -> None:
    q = quotas(max_connections_per_ip=2, max_connections_per_ip_overrides={"10.0.0.9": 3})
    assert [q.admit("CLIENT", "10.0.0.1") for _ in range(3)] == [
        None,
        None,
        Refusal.MAX_CONNECTIONS_PER_IP,
    ]
    assert [q.admit("CLIENT", "10.0.0.9") for _ in range(4)] == [
        None,
        None,
        None,
        Refusal.MAX_CONNECTIONS_PER_IP,
    ]
    assert q.admit("INTERNAL", "10.0.0.1") is None  # brokers share hosts: not counted
    assert q.connections_of("10.0.0.1") == 2
    q.release("CLIENT", "10.0.0.1")
    assert q.admit("CLIENT", "10.0.0.1") is None
    for _ in range(2):
        q.release("CLIENT", "10.0.0.1")
    assert q.connections_of("10.0.0.1") == 0


def test_a_listener_limit_applies_to_the_inter_broker_listener_too() -> None:
    q = quotas(listener_max_connections={"INTERNAL": 1, "CLIENT": 2})
    assert q.admit("INTERNAL", "b") is None
    assert q.admit("INTERNAL", "b") is Refusal.LISTENER_MAX_CONNECTIONS
    assert q.admit("CLIENT", "c") is None
    assert q.admit("CLIENT", "d") is None
    assert q.admit("CLIENT", "e") is Refusal.LISTENER_MAX_CONNECTIONS
    assert q.total == 3  # refusals count nothing


def test_creation_rate_delays_accepts_past_it_but_not_the_inter_broker_listener() -> None:
    q = quotas(max_connection_creation_rate=10)
    now = 100.0
    for _ in range(10):  # one second's worth at once
        assert q.accept_delay_s("CLIENT", now) == 0
        q.accepted("CLIENT", now)
    assert q.accept_delay_s("CLIENT", now) == pytest.approx(0.1)
    assert q.accept_delay_s("INTERNAL", now) == 0
    assert q.accept_delay_s("CLIENT", now + 0.1) == pytest.approx(0)
    q.accepted("CLIENT", now + 0.1)
    assert q.accept_delay_s("CLIENT", now + 0.15) == pytest.approx(0.05)
    accepted, t = 0, now + 0.15
    while t < now + 10.15:  # sustained: the rate, not more
        delay = q.accept_delay_s("CLIENT", t)
        if delay:
            t += delay
            continue
        q.accepted("CLIENT", t)
        accepted += 1
    assert 99 <= accepted <= 101


def test_no_rate_limit_by_default() -> None:
    q = quotas()
    for _ in range(10_000):
        q.accepted("CLIENT", 0.0)
    assert q.accept_delay_s("CLIENT", 0.0) == 0


def test_an_ipv4_client_of_a_dual_stack_listener_counts_as_its_ipv4_address() -> None:
    from broker.server import _unmapped

    assert _unmapped("::ffff:10.0.0.7") == "10.0.0.7"
    assert _unmapped("::1") == "::1"
    assert _unmapped("10.0.0.7") == "10.0.0.7"
