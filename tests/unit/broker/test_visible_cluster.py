"""broker.core.visible_cluster: the status page's snapshot as one principal may see it."""

from __future__ import annotations

from typing import Any

from broker.core.visible_cluster import visible_snapshot
from protocol.acl import ResourceType


def _row(partition: int, leader: int, replicas: list[int]) -> dict[str, Any]:
    return {"partition": partition, "leader": leader, "replicas": replicas}


SNAPSHOT: dict[str, Any] = {
    "cluster_id": "c",
    "brokers": [{"id": 1, "leaders": 3, "replicas": 3}, {"id": 2, "leaders": 0, "replicas": 2}],
    "topics": [
        {"name": "mine", "partitions": [_row(0, 1, [1, 2])]},
        {"name": "payroll", "partitions": [_row(0, 1, [1, 2]), _row(1, 1, [1])]},
    ],
    "groups": [
        {
            "name": "my-app",
            "lag": 7,
            "partitions": [
                {"topic": "mine", "partition": 0, "committed": 3, "lag": 2},
                {"topic": "payroll", "partition": 0, "committed": 1, "lag": 5},
            ],
        },
        {"name": "payroll-app", "lag": 5, "partitions": []},
    ],
}


def test_only_what_the_principal_may_describe_is_left() -> None:
    allowed = {(ResourceType.TOPIC, "mine"), (ResourceType.GROUP, "my-app")}
    seen = visible_snapshot(SNAPSHOT, lambda kind, name: (kind, name) in allowed)
    assert [t["name"] for t in seen["topics"]] == ["mine"]
    assert [g["name"] for g in seen["groups"]] == ["my-app"]
    (group,) = seen["groups"]
    assert [r["topic"] for r in group["partitions"]] == ["mine"]
    assert group["lag"] == 2
    # Counts over the visible partitions only: the hidden topic's are not given away.
    assert [(b["id"], b["leaders"], b["replicas"]) for b in seen["brokers"]] == [
        (1, 1, 1),
        (2, 0, 1),
    ]
    assert seen["cluster_id"] == "c"
    assert len(SNAPSHOT["topics"]) == 2  # the shared snapshot is not changed


def test_everything_allowed_leaves_every_topic_and_group() -> None:
    seen = visible_snapshot(SNAPSHOT, lambda kind, name: True)
    assert seen["topics"] == SNAPSHOT["topics"]
    assert [g["name"] for g in seen["groups"]] == ["my-app", "payroll-app"]
    assert [(b["leaders"], b["replicas"]) for b in seen["brokers"]] == [(3, 3), (0, 2)]
