"""broker.core.client_quotas and broker.core.sampled_rate: Kafka's quota precedence, throttle
time and window expiry, with time an input."""

from __future__ import annotations

import pytest

from broker.core.client_quotas import (
    DEFAULT_ENTITY,
    ClientQuotaManager,
    QuotaEntity,
    QuotaType,
    parse_quota_configs,
    quota_entities,
    resolve_quota,
)
from broker.core.sampled_rate import SampledRate

D = DEFAULT_ENTITY
P = QuotaType.PRODUCE.value

# Every level set, each with its own rate, to see which one wins.
ALL_LEVELS = {
    QuotaEntity("alice", "app"): {P: 1.0},
    QuotaEntity("alice", D): {P: 2.0},
    QuotaEntity("alice", None): {P: 3.0},
    QuotaEntity(D, "app"): {P: 4.0},
    QuotaEntity(D, D): {P: 5.0},
    QuotaEntity(D, None): {P: 6.0},
    QuotaEntity(None, "app"): {P: 7.0},
    QuotaEntity(None, D): {P: 8.0},
}


def test_entities_in_kafkas_order() -> None:
    assert [e.zk_path for e in quota_entities("alice", "app")] == [
        "users/alice/clients/app",
        "users/alice/clients/<default>",
        "users/alice",
        "users/<default>/clients/app",
        "users/<default>/clients/<default>",
        "users/<default>",
        "clients/app",
        "clients/<default>",
    ]


@pytest.mark.parametrize(
    ("removed", "expected_quota", "expected_tags"),
    [
        (0, 1.0, ("alice", "app")),
        (1, 2.0, ("alice", "app")),
        (2, 3.0, ("alice", "")),
        (3, 4.0, ("alice", "app")),
        (4, 5.0, ("alice", "app")),
        (5, 6.0, ("alice", "")),
        (6, 7.0, ("", "app")),
        (7, 8.0, ("", "app")),
    ],
)
def test_most_specific_level_wins(
    removed: int, expected_quota: float, expected_tags: tuple[str, str]
) -> None:
    """With the `removed` most specific levels gone, the next one applies, and its level
    decides what shares the rate."""
    levels = dict(list(ALL_LEVELS.items())[removed:])
    assert resolve_quota(levels, QuotaType.PRODUCE, "alice", "app") == (
        expected_tags,
        expected_quota,
    )


def test_each_quota_type_resolves_on_its_own() -> None:
    quotas = {
        QuotaEntity("alice", None): {QuotaType.FETCH.value: 10.0},
        QuotaEntity(None, D): {P: 20.0},
    }
    assert resolve_quota(quotas, QuotaType.PRODUCE, "alice", "app") == (("", "app"), 20.0)
    assert resolve_quota(quotas, QuotaType.FETCH, "alice", "app") == (("alice", ""), 10.0)
    assert resolve_quota(quotas, QuotaType.REQUEST, "alice", "app") == (("alice", "app"), None)


def test_other_users_and_clients_do_not_match() -> None:
    quotas = {QuotaEntity("bob", None): {P: 1.0}, QuotaEntity(None, "other"): {P: 1.0}}
    assert resolve_quota(quotas, QuotaType.PRODUCE, "alice", "app")[1] is None


def test_parse_keeps_quota_keys_and_reports_bad_values() -> None:
    quotas, problems = parse_quota_configs(
        {P: "1048576", "consumer_byte_rate": "-1", "request_percentage": "x", "SCRAM-SHA-256": "s"}
    )
    assert quotas == {P: 1048576.0}
    assert set(problems) == {"consumer_byte_rate", "request_percentage"}


def test_rate_divides_by_at_least_the_quota_window() -> None:
    rate = SampledRate(window_ms=1000, window_count=11)
    rate.record(10_000, now_ms=0)
    # One burst at the start counts over (11 - 1) windows, as Kafka's Rate.windowSize.
    assert rate.window_size_ms(0) == 10_000
    assert rate.rate_per_sec(0) == pytest.approx(1000.0)
    assert rate.window_size_ms(10_999) == 10_999
    assert rate.rate_per_sec(15_500) == 0.0  # the burst's window expired


def test_window_expiry_forgets_old_values() -> None:
    rate = SampledRate(window_ms=1000, window_count=3)
    rate.record(300, now_ms=0)
    rate.record(300, now_ms=2_500)
    assert rate.rate_per_sec(2_500) == pytest.approx(600 / 2.5)
    assert rate.rate_per_sec(3_000) == pytest.approx(300 / 2.0)  # window 0 gone at 3 s
    assert not rate.idle(4_999)
    assert rate.idle(5_000)


def test_within_quota_is_not_throttled() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, quotas={QuotaEntity(None, "app"): {P: 100.0}})
    assert manager.record("ANONYMOUS", "app", 1000, now_ms=0) == 0  # 1000 B / 10 s = 100 B/s


def test_throttle_time_is_kafkas_formula() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, quotas={QuotaEntity(None, "app"): {P: 100.0}})
    # 1500 bytes over a 10 s window: 150 B/s, 50 % over: (150 - 100) / 100 * 10 000 ms.
    assert manager.record("ANONYMOUS", "app", 1500, now_ms=0) == 5_000
    (((tags), stats),) = list(manager.sensors(now_ms=0))
    assert tags == ("", "app")
    assert (stats.throttled, stats.throttle_time_ms_total) == (1, 5_000)


def test_throttle_time_is_capped_at_the_quota_window() -> None:
    manager = ClientQuotaManager(
        QuotaType.PRODUCE,
        window_ms=1000,
        window_count=11,
        quotas={QuotaEntity(None, "app"): {P: 1.0}},
    )
    assert manager.record("ANONYMOUS", "app", 1_000_000, now_ms=0) == 11_000


def test_throttled_until_the_burst_window_expires() -> None:
    manager = ClientQuotaManager(
        QuotaType.PRODUCE, window_count=3, quotas={QuotaEntity(None, "app"): {P: 100.0}}
    )
    throttle_ms = manager.record("u", "app", 400, now_ms=0)  # 400 B over 2 s: 200 B/s
    assert throttle_ms == 2_000
    assert manager.record("u", "app", 0, now_ms=2_999) > 0  # still 400 B in the windows
    assert manager.record("u", "app", 0, now_ms=3_000) == 0  # window 0 expired


def test_unquoted_clients_are_not_measured() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, quotas={QuotaEntity(None, "app"): {P: 1.0}})
    assert manager.record("u", "other", 10**9, now_ms=0) == 0
    assert [tags for tags, _ in manager.sensors(0)] == []


def test_a_user_quota_is_shared_by_its_client_ids() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, quotas={QuotaEntity("alice", None): {P: 100.0}})
    assert manager.record("alice", "a", 1000, now_ms=0) == 0
    assert manager.record("alice", "b", 500, now_ms=0) > 0  # 1500 B together
    assert manager.record("bob", "a", 10**9, now_ms=0) == 0


def test_a_changed_quota_applies_to_the_next_record() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, quotas={QuotaEntity(None, "app"): {P: 100.0}})
    assert manager.record("u", "app", 900, now_ms=0) == 0
    manager.update_quotas({QuotaEntity(None, "app"): {P: 10.0}})
    assert manager.record("u", "app", 900, now_ms=0) > 0
    manager.update_quotas({})
    assert manager.record("u", "app", 10**9, now_ms=0) == 0


def test_idle_sensors_are_forgotten() -> None:
    manager = ClientQuotaManager(
        QuotaType.FETCH, window_count=2, quotas={QuotaEntity(D, None): {"consumer_byte_rate": 1.0}}
    )
    manager.record("alice", "app", 10, now_ms=0)
    assert [tags for tags, _ in manager.sensors(1_999)] == [("alice", "")]
    assert list(manager.sensors(2_000)) == []


def test_an_entity_names_something() -> None:
    with pytest.raises(ValueError, match="names a user"):
        QuotaEntity(None, None)


def test_a_stored_quota_that_is_not_a_positive_finite_number_is_refused() -> None:
    stored = {"producer_byte_rate": "nan", "consumer_byte_rate": "inf", "request_percentage": "50"}
    quotas, problems = parse_quota_configs(stored)
    assert quotas == {"request_percentage": 50.0}
    assert set(problems) == {"producer_byte_rate", "consumer_byte_rate"}
