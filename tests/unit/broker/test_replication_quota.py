"""The reassignment throttle's quota: a sampled bytes/s rate over whole windows."""

from __future__ import annotations

import pytest

from broker.core.replication_quota import ReplicationQuota


def test_not_exceeded_until_more_than_the_rate_is_recorded() -> None:
    quota = ReplicationQuota(window_ms=1000, window_count=11)
    assert not quota.exceeded(1000, 0)
    quota.record(1000, 0)
    assert not quota.exceeded(1000, 0)  # exactly at the rate over one window
    quota.record(1, 10)
    assert quota.exceeded(1000, 10)
    assert not quota.exceeded(-1, 10)  # -1: no throttle


def test_the_rate_falls_as_time_passes_and_old_windows_expire() -> None:
    quota = ReplicationQuota(window_ms=1000, window_count=3)
    quota.record(3000, 0)
    assert quota.rate_bytes_per_sec(500) == pytest.approx(3000)
    assert quota.rate_bytes_per_sec(1500) == pytest.approx(2000)
    assert quota.exceeded(1000, 2500)  # 3000 B over 2.5 s
    assert not quota.exceeded(1000, 3000)  # 3000 B over 3 s
    assert quota.rate_bytes_per_sec(4100) == 0  # the window left the sample


def test_a_steady_copy_at_the_quota_averages_out_at_the_rate() -> None:
    """Copy in 100 KB steps whenever not exceeded, as the fetcher does: over 20 s the
    average stays within one window's allowance of 1 MB/s."""
    quota = ReplicationQuota()
    copied = 0
    for now_ms in range(0, 20_000, 10):
        if not quota.exceeded(1_000_000, now_ms):
            quota.record(100_000, now_ms)
            copied += 100_000
    assert 20_000_000 <= copied <= 21_100_000


def test_windows_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ReplicationQuota(window_ms=0)
