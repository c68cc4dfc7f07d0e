"""`highwater reassign`: move partition replicas between brokers (Kafka's
kafka-reassign-partitions.sh, through the Admin's AlterPartitionReassignments and
ListPartitionReassignments).

One mode per run: --generate --topics T[,T] --broker-list 1,2,3 (the current and a proposed
plan), --execute --plan FILE [--throttle B/s per broker], --verify --plan FILE (completed, in
progress, or not reassigned), --list (in progress), --cancel --plan FILE. What each does and
what the throttle caps: docs/operations.md ("Partition reassignment").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, assert_never

import click

from client.admin import Admin, ElectionResult, OngoingReassignment
from client.cli.common import admin_settings, bootstrap_option, fail, run_client
from client.cli.reassign_plan import PlanError, format_plan, parse_plan, propose
from protocol.errors import ErrorCode

__all__ = ["reassign"]

ADMIN_TIMEOUT_S = 60.0
Plan = dict[tuple[str, int], tuple[int, ...]]
Mode = Literal["generate", "execute", "verify", "list", "cancel"]  # the flag_values below


def _read_plan(path: str | None) -> Plan:
    if path is None:
        fail("--plan FILE is required", exit_code=2)
    try:
        return parse_plan(Path(path).read_text())
    except OSError as exc:
        fail(f"cannot read {path}: {exc}", exit_code=2)
    except PlanError as exc:
        fail(f"{path}: {exc}", exit_code=2)


def _int_list(text: str) -> list[int]:
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        fail(f"--broker-list must be comma-separated broker ids, got {text!r}", exit_code=2)


@click.command("reassign")
@bootstrap_option
@click.option("--generate", "mode", flag_value="generate", help="Propose a plan.")
@click.option("--execute", "mode", flag_value="execute", help="Start the plan.")
@click.option("--verify", "mode", flag_value="verify", help="Is the plan done?")
@click.option("--list", "mode", flag_value="list", help="Reassignments in progress.")
@click.option("--cancel", "mode", flag_value="cancel", help="Revert the plan's moves.")
@click.option("--topics", help="Comma-separated topics to move (--generate).")
@click.option("--broker-list", help="Comma-separated broker ids to move to (--generate).")
@click.option("--plan", "plan_path", help="A plan file in Kafka's JSON format.")
@click.option(
    "--throttle",
    type=click.IntRange(min=1),
    help="Replication throttle in bytes/s for the moving replicas (--execute).",
)
def reassign(
    bootstrap: str,
    mode: Mode | None,
    topics: str | None,
    broker_list: str | None,
    plan_path: str | None,
    throttle: int | None,
) -> None:
    """Reassign partitions to other brokers (Kafka's kafka-reassign-partitions)."""
    if mode is None:
        fail("give one of --generate, --execute, --verify, --list, --cancel", exit_code=2)
    if throttle is not None and mode != "execute":
        fail("--throttle goes with --execute", exit_code=2)
    match mode:
        case "generate":
            if not topics or not broker_list:
                fail("--generate needs --topics and --broker-list", exit_code=2)
            _generate(bootstrap, [t for t in topics.split(",") if t], _int_list(broker_list))
        case "list":
            _print_ongoing(run_client(bootstrap, _lister(bootstrap), timeout_s=ADMIN_TIMEOUT_S))
        case "verify":
            _verify(bootstrap, _read_plan(plan_path))
        case "execute" | "cancel":
            plan = _read_plan(plan_path)
            targets: dict[tuple[str, int], tuple[int, ...] | None] = (
                dict(plan) if mode == "execute" else dict.fromkeys(plan)
            )
            _alter(bootstrap, targets, cancel=mode == "cancel", throttle=throttle)
        case _:
            assert_never(mode)


def _lister(bootstrap: str) -> Callable[[], Awaitable[list[OngoingReassignment]]]:
    async def go() -> list[OngoingReassignment]:
        async with Admin(bootstrap, **admin_settings()) as admin:
            return await admin.list_partition_reassignments()

    return go


def _generate(bootstrap: str, topics: list[str], brokers: list[int]) -> None:
    async def describe() -> Plan:
        async with Admin(bootstrap, **admin_settings()) as admin:
            found = await admin.describe_topics(topics)
            return {(t.name, p.partition): p.replicas for t in found for p in t.partitions}

    current = run_client(bootstrap, describe, timeout_s=ADMIN_TIMEOUT_S)
    missing = sorted(set(topics) - {t for t, _ in current})
    if missing:
        fail(f"unknown topics: {', '.join(missing)}")
    try:
        proposed = propose(current, brokers)
    except PlanError as exc:
        fail(str(exc))
    click.echo("Current partition replica assignment")
    click.echo(format_plan(current))
    click.echo("")
    click.echo("Proposed partition reassignment configuration")
    click.echo(format_plan(proposed))


def _alter(
    bootstrap: str,
    targets: dict[tuple[str, int], tuple[int, ...] | None],
    *,
    cancel: bool,
    throttle: int | None,
) -> None:
    async def alter() -> list[ElectionResult]:
        async with Admin(bootstrap, **admin_settings()) as admin:
            return await admin.alter_partition_reassignments(
                targets, throttle_bytes_per_sec=throttle
            )

    results = run_client(bootstrap, alter, timeout_s=ADMIN_TIMEOUT_S)
    verb = "cancelled" if cancel else "started"
    if throttle is not None:
        click.echo(f"throttle: {throttle} B/s per broker while the new replicas catch up")
    failed = False
    for r in results:
        if r.error_code == ErrorCode.NONE:
            click.echo(f"{r.topic}-{r.partition}: reassignment {verb}")
        else:
            failed = True
            detail = f" ({r.message})" if r.message else ""
            click.echo(f"{r.topic}-{r.partition}: not {verb}: {r.error_code.name}{detail}")
    if failed:
        raise SystemExit(1)


def _verify(bootstrap: str, plan: Plan) -> None:
    async def look() -> tuple[list[OngoingReassignment], Plan]:
        async with Admin(bootstrap, **admin_settings()) as admin:
            ongoing = await admin.list_partition_reassignments()
            found = await admin.describe_topics(sorted({t for t, _ in plan}))
            current = {(t.name, p.partition): p.replicas for t in found for p in t.partitions}
            return ongoing, current

    ongoing, current = run_client(bootstrap, look, timeout_s=ADMIN_TIMEOUT_S)
    running = {(o.topic, o.partition) for o in ongoing}
    pending = False
    for tp, target in sorted(plan.items()):
        name = f"{tp[0]}-{tp[1]}"
        if tp in running:
            pending = True
            click.echo(f"{name}: reassignment in progress")
        elif current.get(tp) == target:
            click.echo(f"{name}: reassignment completed")
        else:
            pending = True
            click.echo(f"{name}: not reassigned (replicas are {list(current.get(tp, ()))})")
    if pending:
        raise SystemExit(1)


def _print_ongoing(ongoing: list[OngoingReassignment]) -> None:
    if not ongoing:
        click.echo("No partition reassignments in progress.")
    for o in ongoing:
        click.echo(
            f"{o.topic}-{o.partition}: replicas {list(o.replicas)} "
            f"adding {list(o.adding_replicas)} removing {list(o.removing_replicas)}"
        )
