"""`highwater configs describe|alter`: topic configs and the cluster-wide broker defaults, live
(Kafka's kafka-configs). `topics alter --config/--delete-config` shares the alter path.

Each config is shown with its value and its source, Kafka's names, highest precedence first:
DYNAMIC_TOPIC_CONFIG (the topic's override), DYNAMIC_DEFAULT_BROKER_CONFIG (a cluster-wide
dynamic default), STATIC_BROKER_CONFIG (server.properties or --override), DEFAULT_CONFIG
(built in). `--synonyms` adds every source a value could come from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from client.admin import (
    Admin,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from client.cli.common import admin_settings, bootstrap_option, fail, run_client
from client.cli.format import format_table
from client.cli.quota_configs import (
    alter_quotas,
    describe_quotas,
    entity_options,
    given_entity,
    parse_add_config,
    quota_entity,
)
from client.cli.refusals import Attempt, Need, administering
from client.cli.topic_args import one_topic, optional_topic
from protocol.messages.common import ConfigResourceType
from protocol.messages.incremental_alter_configs import AlterConfigOpType

__all__ = [
    "alter_config_lines",
    "config_lines",
    "configs",
    "parse_config_pairs",
    "topic_overrides",
]

ADMIN_TIMEOUT_S = 60.0


def parse_config_pairs(pairs: Sequence[str], param_hint: str = "--config") -> dict[str, str]:
    """`key=value` strings as a dict (a value may contain '=')."""
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint=param_hint)
        config[key.strip()] = value.strip()
    return config


def topic_overrides(entries: Sequence[ConfigEntry]) -> dict[str, str]:
    """The topic's own configs (its overrides), as `topics describe` shows them."""
    return {e.name: e.value or "" for e in entries if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}


def config_lines(
    resource: ConfigResource, entries: Sequence[ConfigEntry], *, synonyms: bool = False
) -> list[str]:
    """A title, then one row per config: name, value, source (and for a broker whether it may
    change while the cluster runs; with `synonyms`, every source of the value)."""
    broker = resource.type == ConfigResourceType.BROKER
    if broker and not resource.name:
        title = "Dynamic broker defaults (every broker, every topic without an override):"
        if not entries:
            return [title, "  (none set)"]
    else:
        title = f"Configs of {resource}:"
    header = ["Config", "Value", "Source"]
    if broker:
        header.append("UpdateMode")
    if synonyms:
        header.append("Synonyms")
    rows = []
    for entry in entries:
        row = [entry.name, _value(entry.value), entry.source.name]
        if broker:
            row.append("read-only" if entry.read_only else "cluster-wide")
        if synonyms:
            row.append(
                ",".join(f"{s.source.name}:{s.name}={_value(s.value)}" for s in entry.synonyms)
                or "-"
            )
        rows.append(row)
    return [title, *format_table(header, rows, indent="  ")]


def alter_config_lines(
    resource: ConfigResource, set_configs: dict[str, str], delete_configs: Sequence[str]
) -> list[str]:
    done = [f"set {k}={v}" for k, v in set_configs.items()]
    done += [f"deleted {k}" for k in delete_configs]
    return [f"Updated configs of {resource}: {'; '.join(done)}."]


def alter_configs(
    bootstrap: str,
    resource: ConfigResource,
    set_configs: dict[str, str],
    delete_configs: Sequence[str],
    *,
    validate_only: bool = False,
) -> None:
    """Run one IncrementalAlterConfigs for `resource` (the CLI's alter commands)."""

    async def alter() -> None:
        async with Admin(bootstrap, **admin_settings()) as admin:
            await admin.incremental_alter_configs(
                {resource: admin_ops(set_configs, delete_configs)}, validate_only=validate_only
            )

    run_client(
        bootstrap,
        alter,
        timeout_s=ADMIN_TIMEOUT_S,
        attempt=config_attempt("ALTER_CONFIGS", resource),
    )


def config_attempt(operation: str, resource: ConfigResource) -> Attempt:
    """`operation` on the topic, or, for a broker's settings, on the cluster (as Kafka)."""
    if resource.type == ConfigResourceType.TOPIC:
        return administering(Need(operation, "topic", (resource.name,)))
    return administering(Need(operation, "cluster"))


def admin_ops(set_configs: dict[str, str], delete_configs: Sequence[str]) -> list[AlterConfigOp]:
    ops = [AlterConfigOp(k, AlterConfigOpType.SET, v) for k, v in set_configs.items()]
    return ops + [AlterConfigOp(k, AlterConfigOpType.DELETE) for k in delete_configs]


def _value(value: str | None) -> str:
    return "null" if value is None else value or '""'


def _resource(topic: str | None, broker: int | None, broker_defaults: bool) -> ConfigResource:
    given = [topic is not None, broker is not None, broker_defaults]
    if sum(given) != 1:
        raise click.UsageError(
            "give exactly one of TOPIC (or --topic), --broker, --broker-defaults"
        )
    if topic is not None:
        return ConfigResource.topic(topic)
    return ConfigResource.broker(broker)


@click.group()
def configs() -> None:
    """Describe and alter topic configs, the cluster-wide broker defaults and client quotas
    (--entity-type users|clients), live."""


@configs.command("describe")
@bootstrap_option
@one_topic()
@click.option("--broker", type=click.IntRange(min=0), metavar="ID", help="A broker's settings.")
@click.option(
    "--broker-defaults", is_flag=True, help="The cluster-wide dynamic broker defaults that are set."
)
@click.option("--synonyms", is_flag=True, help="Also every source each value could come from.")
@click.option("-J", "--json", "json_output", is_flag=True, help="One JSON list of configs.")
@entity_options
def configs_describe(
    bootstrap: str,
    topic: str | None,
    topic_option: str | None,
    broker: int | None,
    broker_defaults: bool,
    synonyms: bool,
    json_output: bool,
    **entity_flags: Any,
) -> None:
    """Every config of TOPIC (or every setting of a broker) with its value and source; with
    --entity-type users|clients, the client quotas set (every one of that type without
    --entity-name or --entity-default)."""
    entity = given_entity(entity_flags)
    if entity is not None:
        if topic is not None or topic_option is not None or broker is not None or broker_defaults:
            raise click.UsageError("client quotas are described alone: no topic or broker")
        describe_quotas(bootstrap, quota_entity(entity, describing=True), entity[0], json_output)
        return
    resource = _resource(optional_topic(topic, topic_option), broker, broker_defaults)

    async def describe() -> list[ConfigEntry]:
        async with Admin(bootstrap, **admin_settings()) as admin:
            found = await admin.describe_configs(
                [resource], include_synonyms=synonyms or json_output
            )
            return found.get(resource, [])

    attempt = config_attempt("DESCRIBE_CONFIGS", resource)
    entries = run_client(bootstrap, describe, timeout_s=ADMIN_TIMEOUT_S, attempt=attempt)
    if json_output:
        click.echo(json.dumps([_plain(e) for e in entries], indent=2))
        return
    for line in config_lines(resource, entries, synonyms=synonyms):
        click.echo(line)


@configs.command("alter")
@bootstrap_option
@one_topic()
@click.option("--broker-defaults", is_flag=True, help="Alter the cluster-wide broker defaults.")
@click.option(
    "--config",
    "set_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a config (repeatable).",
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="KEY",
    help="Remove a config: the next source applies again (repeatable).",
)
@click.option(
    "--add-config",
    "add_configs",
    multiple=True,
    metavar="K=V[,K=V...]",
    help="Set configs, kafka-configs' way (a value with commas in brackets: k=[a,b]).",
)
@click.option("--validate-only", is_flag=True, help="Check the change; apply nothing.")
@entity_options
def configs_alter(
    bootstrap: str,
    topic: str | None,
    topic_option: str | None,
    broker_defaults: bool,
    set_pairs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    add_configs: tuple[str, ...],
    validate_only: bool,
    **entity_flags: Any,
) -> None:
    """Set or delete configs of TOPIC or of the cluster-wide broker defaults, or the client
    quotas of a user or client-id (--entity-type users|clients); every broker applies the
    change within seconds. Per-broker settings are not dynamic (server.properties)."""
    set_configs = {**parse_config_pairs(set_pairs), **parse_add_config(add_configs)}
    entity = given_entity(entity_flags)
    if entity is not None:
        if topic is not None or topic_option is not None or broker_defaults:
            raise click.UsageError("client quotas are altered alone: no topic or broker")
        if not set_configs and not delete_configs:
            fail("nothing to alter: give --add-config K=V or --delete-config KEY", exit_code=2)
        target = quota_entity(entity, describing=False)
        assert target is not None  # an alter names its entity
        alter_quotas(
            bootstrap,
            target,
            set_configs,
            delete_configs,
            validate_only,
        )
        return
    resource = _resource(optional_topic(topic, topic_option), None, broker_defaults)
    if not set_configs and not delete_configs:
        fail("nothing to alter: give --config KEY=VALUE or --delete-config KEY", exit_code=2)
    alter_configs(bootstrap, resource, set_configs, delete_configs, validate_only=validate_only)
    if validate_only:
        click.echo(f"Valid: the change to {resource} would be accepted.")
        return
    for line in alter_config_lines(resource, set_configs, delete_configs):
        click.echo(line)


def _plain(entry: ConfigEntry) -> dict[str, object]:
    return {
        "name": entry.name,
        "value": entry.value,
        "source": entry.source.name,
        "read_only": entry.read_only,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source.name} for s in entry.synonyms
        ],
    }
