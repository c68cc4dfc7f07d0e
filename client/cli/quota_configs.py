"""`highwater configs describe|alter --entity-type users|clients`: client quotas (Kafka's
`kafka-configs --entity-type users|clients`, KIP-546), through DescribeClientQuotas and
AlterClientQuotas. An entity is `--entity-type users|clients` with `--entity-name NAME` or
`--entity-default`, or a user and a client-id together with `--user NAME|--user-defaults`
and `--client NAME|--client-defaults` (kafka-configs' flags)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import click

from client.admin import Admin
from client.cli.common import admin_settings, fail, run_client
from client.cli.refusals import Need, administering
from client.quota_admin import (
    CLIENT_ID,
    QUOTA_KEYS,
    USER,
    QuotaEntity,
    alter_client_quotas,
    describe_client_quotas,
)

__all__ = [
    "QUOTA_ENTITY_TYPES",
    "EntityOptions",
    "alter_quotas",
    "describe_quotas",
    "entity_options",
    "given_entity",
    "parse_add_config",
    "quota_entity",
    "quota_lines",
]

QUOTA_ENTITY_TYPES: Final = ("users", "clients")
_TIMEOUT_S: Final = 60.0
_ALTER: Final = administering(Need("ALTER_CONFIGS", "cluster"))
_DESCRIBE: Final = administering(Need("DESCRIBE_CONFIGS", "cluster"))

EntityOptions = tuple[str | None, str | None, bool, str | None, bool, str | None, bool]
F = TypeVar("F", bound=Callable[..., Any])


def entity_options(func: F) -> F:
    """kafka-configs' entity flags; the command gets them as one `entity` tuple
    (EntityOptions), every item None or False when none was given."""
    options = [
        click.option(
            "--entity-type",
            type=click.Choice(QUOTA_ENTITY_TYPES),
            help="users or clients: their client quotas (kafka-configs' flag).",
        ),
        click.option("--entity-name", metavar="NAME", help="The user principal or client-id."),
        click.option(
            "--entity-default", is_flag=True, help="The default user or client-id (<default>)."
        ),
        click.option("--user", metavar="NAME", help="A user; with --client: that pair."),
        click.option("--user-defaults", is_flag=True, help="The default user."),
        click.option("--client", metavar="NAME", help="A client-id; with --user: that pair."),
        click.option("--client-defaults", is_flag=True, help="The default client-id."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def given_entity(kwargs: dict[str, Any]) -> EntityOptions | None:
    """Pops the entity flags from a command's arguments; None if none was given."""
    options: EntityOptions = (
        kwargs.pop("entity_type"),
        kwargs.pop("entity_name"),
        kwargs.pop("entity_default"),
        kwargs.pop("user"),
        kwargs.pop("user_defaults"),
        kwargs.pop("client"),
        kwargs.pop("client_defaults"),
    )
    return options if any(o not in (None, False) for o in options) else None


def parse_add_config(values: Sequence[str]) -> dict[str, str]:
    """kafka-configs' `--add-config k1=v1,k2=v2` (repeatable); a value with commas is put in
    brackets, `k=[a,b]`, as Kafka writes it."""
    pairs: list[str] = []
    for value in values:
        depth, start = 0, 0
        for i, char in enumerate(value):
            if char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
            elif char == "," and depth == 0:
                pairs.append(value[start:i])
                start = i + 1
        pairs.append(value[start:])
    config = {}
    for pair in (p for p in pairs if p.strip()):
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--add-config")
        raw = raw.strip()
        config[key.strip()] = raw[1:-1] if raw.startswith("[") and raw.endswith("]") else raw
    return config


def quota_entity(options: EntityOptions, *, describing: bool) -> QuotaEntity | None:
    """The entity the options name; None when describing every entity of `--entity-type`."""
    entity_type, name, default, user, user_defaults, client, client_defaults = options
    if entity_type is not None:
        if user is not None or user_defaults or client is not None or client_defaults:
            raise click.UsageError(
                "give --entity-type with --entity-name/--entity-default, or --user and --client"
            )
        if name is not None and default:
            raise click.UsageError("give --entity-name or --entity-default, not both")
        if name is None and not default:
            if describing:
                return None
            raise click.UsageError("--entity-type needs --entity-name NAME or --entity-default")
        given = None if default else name
        return QuotaEntity(user=given) if entity_type == "users" else QuotaEntity(client_id=given)
    if (user is not None and user_defaults) or (client is not None and client_defaults):
        raise click.UsageError("give a name or the defaults, not both")
    has_user = user is not None or user_defaults
    has_client = client is not None or client_defaults
    if not has_user and not has_client:
        raise click.UsageError("name an entity: --entity-type users|clients, or --user/--client")
    return QuotaEntity(
        user=(None if user_defaults else user) if has_user else "",
        client_id=(None if client_defaults else client) if has_client else "",
    )


def quota_lines(found: dict[QuotaEntity, dict[str, float]]) -> list[str]:
    """kafka-configs' lines: `Quota configs for user-principal 'alice' are k=v, k=v`."""
    if not found:
        return ["No client quotas set."]
    return [
        f"Quota configs for {entity} are "
        + ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        for entity, values in sorted(found.items(), key=lambda item: str(item[0]))
    ]


def describe_quotas(
    bootstrap: str, entity: QuotaEntity | None, entity_type: str | None, json_output: bool
) -> None:
    types = () if entity_type is None else (USER if entity_type == "users" else CLIENT_ID,)

    async def describe() -> dict[QuotaEntity, dict[str, float]]:
        async with Admin(bootstrap, **admin_settings()) as admin:
            return await describe_client_quotas(admin, entity, entity_types=types)

    found = run_client(bootstrap, describe, timeout_s=_TIMEOUT_S, attempt=_DESCRIBE)
    if json_output:
        listed = [
            {"user": e.user, "client_id": e.client_id, "quotas": values}
            for e, values in sorted(found.items(), key=lambda item: str(item[0]))
        ]
        click.echo(json.dumps(listed, indent=2))
        return
    for line in quota_lines(found):
        click.echo(line)


def alter_quotas(
    bootstrap: str,
    entity: QuotaEntity,
    set_configs: dict[str, str],
    delete_configs: Sequence[str],
    validate_only: bool,
) -> None:
    unknown = sorted((set(set_configs) | set(delete_configs)) - set(QUOTA_KEYS))
    if unknown:
        fail(
            f"not a client quota: {', '.join(unknown)} (quotas: {', '.join(QUOTA_KEYS)})",
            exit_code=2,
        )
    values = {}
    for key, raw in set_configs.items():
        try:
            values[key] = float(raw)
        except ValueError:
            fail(f"{key}={raw}: not a number", exit_code=2)

    async def alter() -> None:
        async with Admin(bootstrap, **admin_settings()) as admin:
            await alter_client_quotas(
                admin, entity, values, delete_configs, validate_only=validate_only
            )

    run_client(bootstrap, alter, timeout_s=_TIMEOUT_S, attempt=_ALTER)
    if validate_only:
        click.echo(f"Valid: the change to the quotas of {entity} would be accepted.")
        return
    done = [f"set {k}={v}" for k, v in set_configs.items()] + [
        f"deleted {k}" for k in delete_configs
    ]
    click.echo(f"Updated quota configs of {entity}: {'; '.join(done)}.")
