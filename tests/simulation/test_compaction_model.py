"""compaction.py's `explained`: which of a key's committed records a replica may lack, as
Kafka's LogCleaner may have removed them (here or on the leader it fetched from)."""

from __future__ import annotations

import pytest

from tests.simulation.compaction import Committed, explained

NOW_MS = 10_000
RETENTION_MS = 300  # delete.retention.ms
REMOVABLE_BEFORE_MS = NOW_MS - RETENTION_MS
VALUE_0 = Committed(0, 1_000, tombstone=False)
VALUE_5 = Committed(5, 2_000, tombstone=False)
OLD_TOMBSTONE_7 = Committed(7, 3_000, tombstone=True)
NEW_TOMBSTONE_7 = Committed(7, NOW_MS - 100, tombstone=True)
VALUE_9 = Committed(9, 4_000, tombstone=False)


@pytest.mark.parametrize(
    ("latest", "high_watermark", "committed", "ok"),
    [
        pytest.param((5, b"v"), 9, [VALUE_0, VALUE_5], True, id="holds-the-latest"),
        pytest.param((0, b"v"), 9, [VALUE_0, VALUE_5], False, id="lacks-the-latest-value"),
        pytest.param(
            (0, b"v"), 9, [VALUE_0, VALUE_5, VALUE_9], True, id="lacks-a-superseded-value"
        ),
        pytest.param(None, 9, [VALUE_0, VALUE_5, VALUE_9], True, id="none-before-the-latest"),
        pytest.param((0, b"v"), 3, [VALUE_0, VALUE_5], True, id="the-latest-above-its-hw"),
        pytest.param(
            (0, b"v"), 9, [VALUE_0, OLD_TOMBSTONE_7], True, id="missed-an-expired-tombstone"
        ),
        pytest.param(
            (0, b"v"), 9, [VALUE_0, NEW_TOMBSTONE_7], False, id="missed-a-recent-tombstone"
        ),
        pytest.param(None, 9, [VALUE_0, OLD_TOMBSTONE_7], True, id="cleaned-an-expired-one"),
        pytest.param((7, None), 9, [VALUE_0, NEW_TOMBSTONE_7], True, id="holds-the-tombstone"),
        pytest.param(None, 9, [], True, id="no-record-of-the-key"),
    ],
)
def test_what_a_replica_may_lack(
    latest: tuple[int, bytes | None] | None,
    high_watermark: int,
    committed: list[Committed],
    ok: bool,
) -> None:
    assert explained(latest, high_watermark, committed, REMOVABLE_BEFORE_MS) is ok
