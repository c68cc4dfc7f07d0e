"""Kafka's reassignment plan JSON and the proposed round robin (client side, pure)."""

from __future__ import annotations

import json

import pytest

from client.cli.reassign_plan import PlanError, format_plan, parse_plan, propose


def test_round_trip_in_kafkas_format() -> None:
    plan = {("t", 1): (2, 3), ("t", 0): (3, 2)}
    text = format_plan(plan)
    assert json.loads(text) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [3, 2]},
            {"topic": "t", "partition": 1, "replicas": [2, 3]},
        ],
    }
    assert parse_plan(text) == plan


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        "[]",
        '{"version":1,"partitions":[]}',
        '{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}',
        '{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
        '{"partitions":[{"topic":"t","partition":0,"replicas":["1"]}]}',
        '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
        '{"topic":"t","partition":0,"replicas":[2]}]}',
    ],
)
def test_bad_plans_are_refused(text: str) -> None:
    with pytest.raises(PlanError):
        parse_plan(text)


def test_propose_spreads_over_the_given_brokers_keeping_the_replication_factor() -> None:
    current = {("t", p): (1, 2) for p in range(3)}
    proposed = propose(current, [3, 2, 4])
    assert proposed == {("t", 0): (2, 3), ("t", 1): (3, 4), ("t", 2): (4, 2)}
    assert all(len(set(r)) == 2 for r in proposed.values())
    with pytest.raises(PlanError):
        propose(current, [5])
