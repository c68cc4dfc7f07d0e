"""`highwater topics create|list|describe|alter|delete`, `highwater cluster describe` (Admin)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import click

from client.admin import (
    Admin,
    ClusterDescription,
    ConfigResource,
    PartitionDescription,
    TopicDescription,
)
from client.cli.common import admin_settings, bootstrap_option, fail, run_client
from client.cli.configs import alter_config_lines, alter_configs, topic_overrides
from client.cli.format import format_table
from client.cli.refusals import Need, administering
from client.cli.topic_args import one_topic, optional_topic, resolve_topic

__all__ = ["cluster", "describe_cluster_lines", "describe_topic_lines", "topics"]

ADMIN_TIMEOUT_S = 60.0  # the whole command; the Admin bounds each request itself
_BROKER_DEFAULT = -1  # CreateTopics' partitions or replication factor the broker chooses


def _admin(bootstrap: str) -> Admin:
    return Admin(bootstrap, **admin_settings())


def _plain(obj: Any) -> Any:
    """Dataclasses, tuples and dicts as JSON-ready values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_plain(v) for v in obj]
    return obj


def _ids(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values) or "-"


def _offset(value: int | None) -> str:
    return "-" if value is None else str(value)  # None: the broker did not answer


PARTITION_COLUMNS = (
    "Partition",
    "Leader",
    "LeaderEpoch",
    "Replicas",
    "Isr",
    "Offline",
    "HighWatermark",
    "LogEndOffsets",
)


def _partition_row(p: PartitionDescription) -> list[str]:
    leos = ",".join(f"{r}={_offset(p.replica_log_end_offsets.get(r))}" for r in p.replicas)
    return [
        str(p.partition),
        str(p.leader) if p.leader >= 0 else "none",
        str(p.leader_epoch),
        _ids(p.replicas),
        _ids(p.isr),
        _ids(p.offline_replicas),
        _offset(p.high_watermark),
        leos or "-",
    ]


def describe_topic_lines(
    topic: TopicDescription, configs: dict[str, str] | None = None
) -> list[str]:
    """kafka-topics --describe's topic line (with the topic's config overrides, if any), then
    a table with one row per partition: leader, epoch, replicas, ISR, offline replicas, the
    high watermark and each replica's log end offset as replica=LEO ("-": its broker is
    offline or did not answer)."""
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    rf = len(partitions[0].replicas) if partitions else 0
    line = f"Topic: {topic.name}\t"
    if topic.topic_id:
        line += f"TopicId: {topic.topic_id}\t"
    line += f"PartitionCount: {len(partitions)}\tReplicationFactor: {rf}"
    if configs:
        line += "\tConfigs: " + ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    lines = [line]
    rows = [_partition_row(p) for p in partitions]
    return lines + format_table(PARTITION_COLUMNS, rows, indent="  ")


def describe_cluster_lines(cluster: ClusterDescription) -> list[str]:
    lines = [
        f"Cluster id: {cluster.cluster_id}",
        f"Controller: {cluster.controller_id} (epoch {cluster.controller_epoch})",
        f"Brokers: {len(cluster.brokers)}",
    ]
    for broker in sorted(cluster.brokers, key=lambda b: b.node_id):
        rack = f"\track: {broker.rack}" if broker.rack else ""
        lines.append(f"\tid: {broker.node_id}\taddress: {broker.host}:{broker.port}{rack}")
    return lines


def _parse_configs(pairs: Sequence[str]) -> dict[str, str]:
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--config")
        config[key] = value
    return config


# --- topics --------------------------------------------------------------------------------


@click.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command("create")
@bootstrap_option
@one_topic("name", "NAME")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="Default: the broker's num.partitions.",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Default: the broker's default.replication.factor.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A topic config such as retention.ms=60000 (repeatable).",
)
def topics_create(
    bootstrap: str,
    name: str | None,
    topic_option: str | None,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
) -> None:
    """Create topic NAME; wait until every partition has a leader."""
    name = resolve_topic(name, topic_option)
    config = _parse_configs(configs)

    async def create(name: str) -> None:
        async with _admin(bootstrap) as admin:
            # -1: the broker's default, as kafka-topics --create sends it (KIP-464)
            await admin.create_topic(
                name,
                _BROKER_DEFAULT if partitions is None else partitions,
                _BROKER_DEFAULT if replication_factor is None else replication_factor,
                config,
            )

    run_client(
        bootstrap,
        create,
        name,
        timeout_s=ADMIN_TIMEOUT_S,
        attempt=administering(Need("CREATE", "topic", (name,))),
    )
    click.echo(f"Created topic {name}.")


@topics.command("list")
@bootstrap_option
def topics_list(bootstrap: str) -> None:
    """Print every topic's name, one per line."""

    async def names() -> list[str]:
        async with _admin(bootstrap) as admin:
            return sorted(await admin.list_topics())

    for name in run_client(bootstrap, names, timeout_s=ADMIN_TIMEOUT_S):
        click.echo(name)


@topics.command("describe")
@bootstrap_option
@one_topic("name", "NAME")
@click.option(
    "-J", "--json", "json_output", is_flag=True, help="One JSON document (a list of topics)."
)
def topics_describe(
    bootstrap: str, name: str | None, topic_option: str | None, json_output: bool
) -> None:
    """Per partition: leader, leader epoch, replicas, ISR, offline replicas, high watermark and
    each replica's log end offset (run it again to watch followers catch up). Without NAME:
    every topic."""
    name = optional_topic(name, topic_option)

    async def describe() -> tuple[list[TopicDescription], dict[str, dict[str, str]]]:
        async with _admin(bootstrap) as admin:
            found = await admin.describe_topics([name] if name is not None else None)
            configs = await admin.describe_configs(ConfigResource.topic(t.name) for t in found)
            overrides = {r.name: topic_overrides(entries) for r, entries in configs.items()}
            return sorted(found, key=lambda t: t.name), overrides

    # Without NAME, Metadata leaves out the topics the principal may not DESCRIBE: no refusal.
    attempt = administering(Need("DESCRIBE", "topic", (name,))) if name is not None else None
    described, overrides = run_client(
        bootstrap, describe, timeout_s=ADMIN_TIMEOUT_S, attempt=attempt
    )
    if json_output:
        topics_json = [{**_plain(t), "configs": overrides.get(t.name, {})} for t in described]
        click.echo(json.dumps(topics_json, indent=2))
        return
    for topic in described:
        for line in describe_topic_lines(topic, overrides.get(topic.name)):
            click.echo(line)


@topics.command("alter")
@bootstrap_option
@one_topic("name", "NAME")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="The new number of partitions: more than now (partitions are never removed).",
)
@click.option(
    "--config",
    "set_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a topic config such as retention.ms=60000 (repeatable).",
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="KEY",
    help="Remove a topic config: the broker default applies again (repeatable).",
)
def topics_alter(
    bootstrap: str,
    name: str | None,
    topic_option: str | None,
    partitions: int | None,
    set_pairs: tuple[str, ...],
    delete_configs: tuple[str, ...],
) -> None:
    """Change topic NAME's configs (every broker applies them within seconds) or add
    partitions (waiting until the new ones have leaders; keys hash to other partitions from
    then on: per-key order holds only within each period)."""
    name = resolve_topic(name, topic_option)
    set_configs = _parse_configs(set_pairs)
    if partitions is None and not set_configs and not delete_configs:
        fail("nothing to alter: give --partitions, --config or --delete-config", exit_code=2)
    if set_configs or delete_configs:
        resource = ConfigResource.topic(name)
        alter_configs(bootstrap, resource, set_configs, delete_configs)
        for line in alter_config_lines(resource, set_configs, delete_configs):
            click.echo(line)
    if partitions is None:
        return

    async def alter(name: str) -> None:
        async with _admin(bootstrap) as admin:
            await admin.create_partitions(name, partitions)

    run_client(
        bootstrap,
        alter,
        name,
        timeout_s=ADMIN_TIMEOUT_S,
        attempt=administering(Need("ALTER", "topic", (name,))),
    )
    click.echo(f"Topic {name} now has {partitions} partitions.")


@topics.command("delete")
@bootstrap_option
@one_topic("name", "NAME")
def topics_delete(bootstrap: str, name: str | None, topic_option: str | None) -> None:
    """Delete topic NAME and its data."""
    name = resolve_topic(name, topic_option)

    async def delete(name: str) -> None:
        async with _admin(bootstrap) as admin:
            await admin.delete_topic(name)

    run_client(
        bootstrap,
        delete,
        name,
        timeout_s=ADMIN_TIMEOUT_S,
        attempt=administering(Need("DELETE", "topic", (name,))),
    )
    click.echo(f"Deleted topic {name}.")


# --- cluster -------------------------------------------------------------------------------


@click.group()
def cluster() -> None:
    """Inspect the cluster (for a local cluster to develop with, see `highwater dev`)."""


@cluster.command("describe")
@bootstrap_option
@click.option("-J", "--json", "json_output", is_flag=True)
def cluster_describe(bootstrap: str, json_output: bool) -> None:
    """Brokers, controller id and controller epoch."""

    async def describe() -> ClusterDescription:
        async with _admin(bootstrap) as admin:
            return await admin.describe_cluster()

    described = run_client(bootstrap, describe, timeout_s=ADMIN_TIMEOUT_S)
    if json_output:
        click.echo(json.dumps(_plain(described), indent=2))
        return
    for line in describe_cluster_lines(described):
        click.echo(line)
