"""`highwater groups list | describe | reset-offsets | delete | delete-offsets` (Admin;
kafka-consumer-groups' commands and flags). Tables on stdout, notes and summaries on stderr,
`--json` for machines. The tables and the reset plan are groups_view.py and reset_plan.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import click

from client.admin import Admin, GroupDescription, GroupOffset, ListGroupsResult
from client.cli.common import admin_settings, bootstrap_option, check_topics, fail, run_client
from client.cli.format import format_table
from client.cli.groups_view import (
    OFFSET_COLUMNS,
    RESET_COLUMNS,
    group_document,
    member_columns,
    member_rows,
    offset_rows,
    reset_rows,
    state_columns,
    state_rows,
)
from client.cli.offsets import parse_timestamp
from client.cli.refusals import Need, administering
from client.cli.reset_plan import (
    PlannedReset,
    ResetSpec,
    parse_duration_ms,
    parse_topic_partitions,
    plan_resets,
)
from client.cli.topic_args import resolve_topics
from client.errors import UnknownTopicError
from client.metadata import list_offsets
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from protocol.topic_partition import TopicPartition

__all__ = ["groups"]

ADMIN_TIMEOUT_S = 60.0
_INACTIVE = ("Empty", "Dead")
_WHY = {
    ErrorCode.NON_EMPTY_GROUP: "it has active members",
    ErrorCode.GROUP_ID_NOT_FOUND: "it does not exist",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "a member of the group subscribes to the topic",
}


def _admin(bootstrap: str) -> Admin:
    return Admin(bootstrap, **admin_settings())


def _why(code: ErrorCode) -> str:
    return _WHY.get(code, code.name)


def _echo_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    for line in format_table(header, rows):
        click.echo(line)


@click.group()
def groups() -> None:
    """Consumer groups: list, describe (lag), reset offsets, delete (kafka-consumer-groups)."""


# --- list ------------------------------------------------------------------------------------


@groups.command("list")
@bootstrap_option
@click.option("--state", "show_state", is_flag=True, help="Also print each group's state.")
@click.option("-J", "--json", "json_output", is_flag=True, help="A JSON list of {group, state}.")
def groups_list(bootstrap: str, show_state: bool, json_output: bool) -> None:
    """Every consumer group of the cluster, one per line."""

    async def listing() -> ListGroupsResult:
        async with _admin(bootstrap) as admin:
            return await admin.list_groups()

    result = run_client(bootstrap, listing, timeout_s=ADMIN_TIMEOUT_S)
    for broker, problem in sorted(result.errors.items()):
        click.echo(
            f"Warning: broker {broker} did not answer ({problem}): its groups are missing",
            err=True,
        )
    listed = result.groups
    if json_output:
        click.echo(json.dumps([{"group": g.group_id, "state": g.state} for g in listed]))
    elif show_state:
        _echo_table(("GROUP", "STATE"), [[g.group_id, g.state] for g in listed])
    else:
        for g in listed:
            click.echo(g.group_id)


# --- describe --------------------------------------------------------------------------------


async def _describe(admin: Admin, group_id: str) -> tuple[GroupDescription, list[GroupOffset]]:
    """The group, and an offset row for every partition it committed or a member owns."""
    (group,) = await admin.describe_groups([group_id])
    if not group.exists:
        return group, []
    offsets = await admin.list_group_offsets(group_id)
    known = {TopicPartition(o.topic, o.partition) for o in offsets}
    owned = {tp for m in group.members for tp in m.assignment} - known
    hws = await admin.high_watermarks(owned)
    offsets += [GroupOffset(tp.topic, tp.partition, None, hws.get(tp)) for tp in sorted(owned)]
    return group, sorted(offsets, key=lambda o: (o.topic, o.partition))


@groups.command("describe")
@bootstrap_option
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@click.option("--members", is_flag=True, help="One row per member instead of per partition.")
@click.option("--state", "show_state", is_flag=True, help="The group's state and coordinator.")
@click.option("--verbose", is_flag=True, help="With --members or --state: more columns.")
@click.option(
    "-J", "--json", "json_output", is_flag=True, help="One JSON document per group (a list)."
)
def groups_describe(
    bootstrap: str,
    group_ids: tuple[str, ...],
    members: bool,
    show_state: bool,
    verbose: bool,
    json_output: bool,
) -> None:
    """Per partition: the group's committed offset (CURRENT-OFFSET), the high watermark, the
    LAG between them, and the member that owns it. --members and --state describe the
    members and the group instead."""
    if members and show_state:
        raise click.UsageError("--members and --state cannot be combined")

    async def describe() -> list[tuple[GroupDescription, list[GroupOffset]]]:
        async with _admin(bootstrap) as admin:
            return [await _describe(admin, g) for g in group_ids]

    attempt = administering(Need("DESCRIBE", "group", group_ids))
    described = run_client(bootstrap, describe, timeout_s=ADMIN_TIMEOUT_S, attempt=attempt)
    missing = [g.group_id for g, _ in described if not g.exists]
    if json_output:
        click.echo(json.dumps([group_document(g, o) for g, o in described if g.exists], indent=2))
    else:
        rows: list[list[str]] = []
        for group, offsets in described:
            if not group.exists:
                continue
            if not group.members:
                click.echo(f"Consumer group '{group.group_id}' has no active members.", err=True)
            elif group.state in ("Assigning", "Reconciling"):
                click.echo(f"Warning: consumer group '{group.group_id}' is rebalancing.", err=True)
            if show_state:
                rows += state_rows(group, verbose)
            elif members:
                rows += member_rows(group, verbose)
            else:
                rows += offset_rows(group, offsets)
        if len(missing) < len(described):
            header = (
                state_columns(verbose)
                if show_state
                else member_columns(verbose)
                if members
                else OFFSET_COLUMNS
            )
            _echo_table(header, rows)
    if missing:
        fail("; ".join(f"consumer group '{g}' does not exist" for g in missing))


# --- reset-offsets ---------------------------------------------------------------------------


def _reset_spec(
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    shift_by: int | None,
    to_datetime: str | None,
    by_duration: str | None,
) -> ResetSpec:
    given = [
        name
        for name, value in (
            ("--to-earliest", to_earliest or None),
            ("--to-latest", to_latest or None),
            ("--to-offset", to_offset),
            ("--shift-by", shift_by),
            ("--to-datetime", to_datetime),
            ("--by-duration", by_duration),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, "
            "--to-datetime, --by-duration" + (f" (got {', '.join(given)})" if given else "")
        )
    if to_earliest:
        return ResetSpec("earliest")
    if to_latest:
        return ResetSpec("latest")
    if to_offset is not None:
        return ResetSpec("offset", to_offset)
    if shift_by is not None:
        return ResetSpec("shift", shift_by)
    if to_datetime is not None:
        try:
            return ResetSpec("datetime", parse_timestamp(to_datetime))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--to-datetime") from exc
    assert by_duration is not None
    try:
        duration_ms = parse_duration_ms(by_duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--by-duration") from exc
    return ResetSpec("duration", int(time.time() * 1000) - duration_ms)


async def _reset_partitions(
    admin: Admin, topics: Sequence[str], all_topics: bool, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if all_topics:
        if not committed:
            fail("the group has no committed offsets: name the partitions with --topic")
        return sorted(committed)
    chosen: set[TopicPartition] = set()
    wanted = [parse_topic_partitions(text) for text in topics]
    existing = await check_topics(
        admin.metadata, [topic for topic, _ in wanted], admin.request_timeout_ms
    )
    for topic, partitions in wanted:
        found = existing[topic]
        for p in partitions if partitions is not None else found:
            if p not in found:
                raise UnknownTopicError(
                    f"UNKNOWN_TOPIC_OR_PARTITION: {topic!r} has no partition {p} "
                    f"(it has {len(found)})"
                )
            chosen.add(TopicPartition(topic, p))
    return sorted(chosen)


async def _plan(
    admin: Admin, group_id: str, spec: ResetSpec, topics: Sequence[str], all_topics: bool
) -> tuple[GroupDescription, list[PlannedReset]]:
    (group,) = await admin.describe_groups([group_id])
    if group.state not in _INACTIVE:
        fail(
            f"offsets can only be reset while group '{group_id}' is inactive, but it is "
            f"{group.state} with {len(group.members)} member(s): stop its consumers first"
        )
    committed = {
        TopicPartition(o.topic, o.partition): o.committed_offset
        for o in await admin.list_group_offsets(group_id, high_watermarks=False)
        if o.committed_offset is not None
    }
    tps = await _reset_partitions(admin, topics, all_topics, committed)
    keys = [(tp.topic, tp.partition) for tp in tps]
    timeout = admin.request_timeout_ms
    earliest = await list_offsets(
        admin.metadata, dict.fromkeys(keys, EARLIEST_TIMESTAMP), timeout_ms=timeout
    )
    latest = await list_offsets(
        admin.metadata, dict.fromkeys(keys, LATEST_TIMESTAMP), timeout_ms=timeout
    )
    by_time = None
    if spec.kind in ("datetime", "duration"):
        found = await list_offsets(
            admin.metadata, dict.fromkeys(keys, spec.value), timeout_ms=timeout
        )
        by_time = {TopicPartition(*k): (v[0] if v[0] >= 0 else None) for k, v in found.items()}
    try:
        plan = plan_resets(
            spec,
            tps,
            committed,
            {TopicPartition(*k): v[0] for k, v in earliest.items()},
            {TopicPartition(*k): v[0] for k, v in latest.items()},
            by_time,
        )
    except ValueError as exc:
        fail(str(exc))
    return group, plan


@groups.command("reset-offsets")
@bootstrap_option
@click.argument("group_id", metavar="GROUP")
@click.argument("topic_arguments", metavar="[TOPIC[:P,P...]]...", nargs=-1)
@click.option(
    "-t",
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P...]",
    help="The topic's partitions (all, or those listed); repeatable.",
)
@click.option("--all-topics", is_flag=True, help="Every partition the group has an offset for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The high watermark.")
@click.option("--to-offset", type=click.IntRange(min=0), metavar="N", help="Offset N.")
@click.option("--shift-by", type=int, metavar="N", help="The committed offset + N (N may be < 0).")
@click.option(
    "--to-datetime",
    metavar="TIME",
    help="The first offset at or after TIME (ISO-8601, no zone: local; or ms since the epoch).",
)
@click.option(
    "--by-duration",
    metavar="DURATION",
    help="The first offset at or after now - DURATION (ISO-8601, e.g. PT1H, P1DT12H).",
)
@click.option("--execute", is_flag=True, help="Apply the plan (without it: a dry run).")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
@click.option("-J", "--json", "json_output", is_flag=True, help="The plan as JSON.")
def groups_reset_offsets(
    bootstrap: str,
    group_id: str,
    topic_arguments: tuple[str, ...],
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    shift_by: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    execute: bool,
    dry_run: bool,
    json_output: bool,
) -> None:
    """Move the committed offsets of GROUP, which must have no active members. Prints the
    plan; only --execute changes anything. Offsets outside a partition's range are clamped."""
    topics = resolve_topics(topic_arguments, topics)
    if bool(topics) == all_topics:
        raise click.UsageError(
            "give TOPIC or --topic TOPIC (repeatable) or --all-topics (one of them)"
        )
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run cannot be combined")
    for text in topics:
        try:
            parse_topic_partitions(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--topic") from exc
    spec = _reset_spec(to_earliest, to_latest, to_offset, shift_by, to_datetime, by_duration)

    async def reset() -> list[PlannedReset]:
        async with _admin(bootstrap) as admin:
            _, plan = await _plan(admin, group_id, spec, topics, all_topics)
            if execute and plan:
                await admin.alter_group_offsets(
                    group_id, {(p.tp.topic, p.tp.partition): p.new for p in plan}
                )
            return plan

    plan = run_client(bootstrap, reset, timeout_s=ADMIN_TIMEOUT_S)
    for p in plan:
        if p.warning:
            click.echo(f"Warning: {p.warning}", err=True)
    if json_output:
        click.echo(
            json.dumps(
                [
                    {
                        "group": group_id,
                        "topic": p.tp.topic,
                        "partition": p.tp.partition,
                        "current_offset": p.current,
                        "new_offset": p.new,
                    }
                    for p in plan
                ]
            )
        )
    else:
        _echo_table(RESET_COLUMNS, reset_rows(group_id, plan))
    if execute:
        click.echo(f"Reset the offsets of group {group_id} for {len(plan)} partition(s).", err=True)
    else:
        click.echo("Dry run: nothing changed (add --execute to apply this plan).", err=True)


# --- delete, delete-offsets ------------------------------------------------------------------


@groups.command("delete")
@bootstrap_option
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
def groups_delete(bootstrap: str, group_ids: tuple[str, ...]) -> None:
    """Delete groups (which must have no active members) and their committed offsets."""

    async def delete() -> dict[str, ErrorCode]:
        async with _admin(bootstrap) as admin:
            return await admin.delete_groups(group_ids)

    results = run_client(bootstrap, delete, timeout_s=ADMIN_TIMEOUT_S)
    done = [g for g, code in results.items() if code == ErrorCode.NONE]
    failed = {g: code for g, code in results.items() if code != ErrorCode.NONE}
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        fail(
            "; ".join(
                f"group '{g}' could not be deleted: {_why(code)}" for g, code in failed.items()
            )
        )


@groups.command("delete-offsets")
@bootstrap_option
@click.argument("group_id", metavar="GROUP")
@click.argument("topic_arguments", metavar="[TOPIC[:P,P...]]...", nargs=-1)
@click.option(
    "-t",
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P...]",
    help="The topic's partitions (all the group has offsets for, or those listed); repeatable.",
)
def groups_delete_offsets(
    bootstrap: str, group_id: str, topic_arguments: tuple[str, ...], topics: tuple[str, ...]
) -> None:
    """Forget GROUP's committed offsets of these topics (none of its members may subscribe to
    them); works for deleted topics too."""
    topics = resolve_topics(topic_arguments, topics)
    if not topics:
        raise click.UsageError("give the topics: TOPIC or --topic TOPIC (repeatable)")
    wanted: list[tuple[str, tuple[int, ...] | None]] = []
    for text in topics:
        try:
            wanted.append(parse_topic_partitions(text))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--topic") from exc

    async def delete() -> dict[TopicPartition, ErrorCode]:
        async with _admin(bootstrap) as admin:
            committed = {
                TopicPartition(o.topic, o.partition)
                for o in await admin.list_group_offsets(group_id, high_watermarks=False)
            }
            chosen = set()
            for topic, partitions in wanted:
                if partitions is None:
                    chosen |= {tp for tp in committed if tp.topic == topic}
                else:
                    chosen |= {TopicPartition(topic, p) for p in partitions}
            if not chosen:
                fail(f"group '{group_id}' has no offsets for {', '.join(t for t, _ in wanted)}")
            return await admin.delete_group_offsets(group_id, chosen)

    results = run_client(bootstrap, delete, timeout_s=ADMIN_TIMEOUT_S)
    rows = [
        [
            tp.topic,
            str(tp.partition),
            "Successful" if code == ErrorCode.NONE else f"Error:{code.name}",
        ]
        for tp, code in sorted(results.items())
    ]
    _echo_table(("TOPIC", "PARTITION", "STATUS"), rows)
    failed = {code for code in results.values() if code != ErrorCode.NONE}
    if failed:
        fail("; ".join(sorted(_why(code) for code in failed)))
    click.echo(
        f"Deleted the offsets of group {group_id} for {len(results)} partition(s).", err=True
    )
