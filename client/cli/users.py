"""`highwater users add|delete|list`: SCRAM credentials (Kafka's `kafka-configs --entity-type
users --alter --add-config 'SCRAM-SHA-256=[password=...]'`), through any broker."""

from __future__ import annotations

import json
from pathlib import Path

import click

from client.admin import Admin
from client.cli.common import admin_settings, bootstrap_option, cli_security, fail, run_client
from client.cli.local_security import write_private
from client.cli.refusals import Need, administering
from client.cli.user_properties import user_client_properties
from client.security_admin import SCRAM_MECHANISMS, delete_user, describe_users, upsert_user

__all__ = ["users"]

_TIMEOUT_S = 60.0
# AlterUserScramCredentials and DescribeUserScramCredentials: ALTER, DESCRIBE on the cluster.
_ALTER = administering(Need("ALTER", "cluster"))
_DESCRIBE = administering(Need("DESCRIBE", "cluster"))
_MECHANISM = click.option(
    "--mechanism",
    "mechanisms",
    multiple=True,
    type=click.Choice(list(SCRAM_MECHANISMS)),
    help="Repeatable; default: both SCRAM-SHA-256 and SCRAM-SHA-512.",
)


def _admin(bootstrap: str) -> Admin:
    return Admin(bootstrap, **admin_settings())


@click.group()
def users() -> None:
    """Users' SCRAM credentials (stored salted in ZooKeeper, /config/users/<name>)."""


@users.command("add")
@bootstrap_option
@click.argument("name")
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    envvar="HIGHWATER_USER_PASSWORD",
    help="The password (prompted for if not given; env HIGHWATER_USER_PASSWORD).",
)
@_MECHANISM
@click.option(
    "--iterations",
    type=click.IntRange(4096, 16384),
    default=4096,
    show_default=True,
    help="PBKDF2 iterations of the salted password.",
)
@click.option(
    "--write-client-properties",
    "properties_path",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    metavar="FILE",
    help="Also write NAME's client properties to FILE (mode 0600) for its --command-config: "
    "the --command-config's security.protocol, sasl.mechanism and ssl.truststore.location "
    "with NAME's username and password.",
)
def add(
    bootstrap: str,
    name: str,
    password: str,
    mechanisms: tuple[str, ...],
    iterations: int,
    properties_path: Path | None,
) -> None:
    """Add user NAME, or replace its password."""
    chosen = mechanisms or tuple(SCRAM_MECHANISMS)
    security = cli_security()
    if properties_path is not None and (security is None or not security.uses_sasl):
        fail(
            "--write-client-properties copies the connection settings of a SASL "
            "--command-config (security.protocol SASL_SSL or SASL_PLAINTEXT); there is none",
            exit_code=2,
        )

    async def run() -> None:
        async with _admin(bootstrap) as admin:
            await upsert_user(admin, name, password, chosen, iterations)

    run_client(bootstrap, run, timeout_s=_TIMEOUT_S, attempt=_ALTER)
    click.echo(f"Credentials of user {name} set ({', '.join(chosen)}).", err=True)
    if properties_path is not None and security is not None:
        try:
            write_private(properties_path, user_client_properties(security, name, password, chosen))
        except OSError as exc:
            fail(f"credentials set, but {properties_path} was not written: {exc}")
        click.echo(f"Client properties of user {name} written to {properties_path} (mode 0600).")


@users.command("delete")
@bootstrap_option
@click.argument("name")
@_MECHANISM
def delete(bootstrap: str, name: str, mechanisms: tuple[str, ...]) -> None:
    """Delete the credentials of user NAME (its open connections stay open)."""

    async def run() -> None:
        async with _admin(bootstrap) as admin:
            found = await describe_users(admin, [name])
            have = [m for m, _ in found.get(name, [])]
            await delete_user(admin, name, mechanisms or have)

    run_client(bootstrap, run, timeout_s=_TIMEOUT_S, attempt=_ALTER)
    click.echo(f"Credentials of user {name} deleted.", err=True)


@users.command("list")
@bootstrap_option
@click.option("-J", "--json", "as_json", is_flag=True, help="One JSON object: user -> mechanisms.")
def list_users(bootstrap: str, as_json: bool) -> None:
    """Users with credentials, and their mechanisms (never the credentials)."""

    async def run() -> dict[str, list[tuple[str, int]]]:
        async with _admin(bootstrap) as admin:
            return await describe_users(admin)

    found = run_client(bootstrap, run, timeout_s=_TIMEOUT_S, attempt=_DESCRIBE)
    if as_json:
        shaped = {u: [{"mechanism": m, "iterations": i} for m, i in ms] for u, ms in found.items()}
        click.echo(json.dumps(shaped, sort_keys=True))
        return
    for user, mechanisms in sorted(found.items()):
        listed = ", ".join(f"{m} (iterations {i})" for m, i in mechanisms)
        click.echo(f"{user}\t{listed}")
    click.echo(f"{len(found)} users", err=True)
