"""Reassignment plans in Kafka's JSON format, {"version":1,"partitions":[{"topic","partition",
"replicas"}]} (kafka-reassign-partitions.sh's files). Pure.

`propose` is Kafka's rack-unaware round robin over the given brokers (the controller's
controller/assignment.py, which client code may not import) with a fixed start, so the same
input proposes the same plan.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PlanError", "format_plan", "parse_plan", "propose"]

Plan = dict[tuple[str, int], tuple[int, ...]]


class PlanError(ValueError):
    """A plan file that is not Kafka's plan JSON."""


def format_plan(plan: Mapping[tuple[str, int], Sequence[int]]) -> str:
    entries = [
        {"topic": t, "partition": p, "replicas": list(replicas)}
        for (t, p), replicas in sorted(plan.items())
    ]
    return json.dumps({"version": 1, "partitions": entries})


def parse_plan(text: str) -> Plan:
    try:
        obj: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"not JSON: {exc}") from exc
    entries = obj.get("partitions") if isinstance(obj, dict) else None
    if not isinstance(entries, list) or not entries:
        raise PlanError('expected {"version":1,"partitions":[...]} with at least one entry')
    plan: Plan = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise PlanError(f"bad entry {entry!r}")
        topic, partition, replicas = (entry.get(k) for k in ("topic", "partition", "replicas"))
        if not isinstance(topic, str) or type(partition) is not int or partition < 0:
            raise PlanError(f"bad topic or partition in {entry!r}")
        if not isinstance(replicas, list) or any(type(r) is not int for r in replicas):
            raise PlanError(f"bad replicas in {entry!r}")
        if not replicas or len(set(replicas)) != len(replicas):
            raise PlanError(f"replicas must be non-empty and distinct in {entry!r}")
        if (topic, partition) in plan:
            raise PlanError(f"{topic}-{partition} appears twice")
        plan[(topic, partition)] = tuple(replicas)
    return plan


def propose(current: Mapping[tuple[str, int], Sequence[int]], broker_ids: Sequence[int]) -> Plan:
    """Each topic's partitions spread over `broker_ids` (keeping each partition's replication
    factor). Raises PlanError when a replication factor exceeds the brokers given."""
    brokers = sorted(set(broker_ids))
    count = len(brokers)
    plan: Plan = {}
    for (topic, partition), replicas in sorted(current.items()):
        factor = len(replicas)
        if factor > count or count == 0:
            raise PlanError(
                f"{topic}-{partition} has {factor} replicas but only {count} brokers are given"
            )
        shift = partition // count
        first = partition % count
        chosen = [brokers[first]]
        for j in range(factor - 1):
            chosen.append(brokers[(first + 1 + (shift + j) % max(1, count - 1)) % count])
        plan[(topic, partition)] = tuple(chosen)
    return plan
