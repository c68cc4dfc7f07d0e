"""What an authenticated principal sees of the status page's cluster snapshot
(`GET /api/cluster`, broker/cluster_view.py). Pure.

As Metadata and OffsetFetch answer: only the topics it may DESCRIBE, only the groups it may
DESCRIBE, and in those only the partitions of topics it may DESCRIBE. The brokers are shown (as
Metadata shows them), but their leader and replica counts cover only the visible partitions, so
the hidden ones are not counted either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.acl import ResourceType

__all__ = ["MayDescribe", "visible_snapshot"]

# (resource type, name) -> may the principal DESCRIBE it?
MayDescribe = Callable[[ResourceType, str], bool]


def visible_snapshot(snapshot: dict[str, Any], may_describe: MayDescribe) -> dict[str, Any]:
    """A copy of `snapshot` with what the principal may not DESCRIBE left out."""
    topics = [t for t in snapshot["topics"] if may_describe(ResourceType.TOPIC, t["name"])]
    visible = {t["name"] for t in topics}
    groups = []
    for group in snapshot["groups"]:
        if not may_describe(ResourceType.GROUP, group["name"]):
            continue
        rows = [r for r in group["partitions"] if r["topic"] in visible]
        lag = sum(r["lag"] or 0 for r in rows)
        groups.append({**group, "partitions": rows, "lag": lag})
    rows = [row for topic in topics for row in topic["partitions"]]
    brokers = [
        {
            **broker,
            "leaders": sum(1 for r in rows if r["leader"] == broker["id"]),
            "replicas": sum(1 for r in rows if broker["id"] in r["replicas"]),
        }
        for broker in snapshot["brokers"]
    ]
    return {**snapshot, "brokers": brokers, "topics": topics, "groups": groups}
