"""`highwater acls add|remove|list`: Kafka's kafka-acls with its flags (--allow-principal,
--deny-principal, --allow-host, --deny-host, --operation, --topic, --group, --cluster,
--resource-pattern-type, --producer, --consumer), through any broker."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from client.admin import Admin
from client.cli.common import admin_settings, bootstrap_option, fail, run_client
from client.cli.refusals import Need, administering
from client.security_admin import (
    OPERATIONS,
    Acl,
    AclQuery,
    create_acls,
    delete_acls,
    describe_acls,
)

__all__ = ["acls"]

_TIMEOUT_S = 60.0
# CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE.
_ALTER = administering(Need("ALTER", "cluster"))
_DESCRIBE = administering(Need("DESCRIBE", "cluster"))
F = TypeVar("F", bound=Callable[..., Any])
_CLUSTER = "kafka-cluster"
_OPERATION_NAMES = {name.replace("_", "").lower(): name for name in OPERATIONS if name != "ANY"}


def _resources(func: F) -> F:
    for option in reversed(
        [
            click.option("--topic", "topics", multiple=True, help="A topic (or prefix); '*': all."),
            click.option("--group", "groups", multiple=True, help="A group (or prefix); '*': all."),
            click.option("--cluster", is_flag=True, help="The cluster resource."),
            click.option(
                "--resource-pattern-type",
                "pattern_type",
                type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
                default=None,
                help="literal (default for add), prefixed; for list/remove also any, match.",
            ),
        ]
    ):
        func = option(func)
    return func


def _principals(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--allow-principal", "allow_principals", multiple=True, metavar="User:NAME"
            ),
            click.option("--deny-principal", "deny_principals", multiple=True, metavar="User:NAME"),
            click.option("--allow-host", "allow_hosts", multiple=True, help="Default: *."),
            click.option("--deny-host", "deny_hosts", multiple=True, help="Default: *."),
            click.option(
                "--operation",
                "operations",
                multiple=True,
                help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                "DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable).",
            ),
        ]
    ):
        func = option(func)
    return func


def _operation(text: str) -> str:
    name = _OPERATION_NAMES.get(text.replace("_", "").replace("-", "").lower())
    if name is None:
        fail(f"unknown operation {text!r} (Kafka's names: Read, Write, Describe, ...)")
    return name


def _patterns(
    topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool, pattern_type: str
) -> list[tuple[str, str, str]]:
    patterns = [("TOPIC", t, pattern_type) for t in topics]
    patterns += [("GROUP", g, pattern_type) for g in groups]
    if cluster:
        patterns.append(("CLUSTER", _CLUSTER, "LITERAL"))
    return patterns


def _admin(bootstrap: str) -> Admin:
    return Admin(bootstrap, **admin_settings())


@click.group()
def acls() -> None:
    """ACLs (Kafka's AclAuthorizer: checked when brokers set authorizer.class.name)."""


@acls.command("add")
@bootstrap_option
@_principals
@_resources
@click.option("--producer", is_flag=True, help="WRITE, DESCRIBE, CREATE on the topics.")
@click.option("--consumer", is_flag=True, help="READ, DESCRIBE on the topics, READ on the groups.")
def add(
    bootstrap: str,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...],
    operations: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    pattern_type: str | None,
    producer: bool,
    consumer: bool,
) -> None:
    """Add ACLs: every principal x host x operation on every resource named."""
    kind = (pattern_type or "literal").upper()
    if kind not in ("LITERAL", "PREFIXED"):
        fail("--resource-pattern-type for add: literal or prefixed")
    if not allow_principals and not deny_principals:
        fail("name a principal: --allow-principal User:NAME or --deny-principal User:NAME")
    wanted: list[Acl] = []
    ops = [_operation(o) for o in operations]
    for permission, principals, hosts in (
        ("ALLOW", allow_principals, allow_hosts or ("*",)),
        ("DENY", deny_principals, deny_hosts or ("*",)),
    ):
        for principal in principals:
            for host in hosts:
                for rtype, name, ptype in _patterns(topics, groups, cluster, kind):
                    for op in _convenience(rtype, producer, consumer) or ops:
                        wanted.append(Acl(rtype, name, ptype, principal, host, op, permission))
    if not wanted:
        fail("nothing to add: name --operation (or --producer/--consumer) and a resource")

    async def run() -> None:
        async with _admin(bootstrap) as admin:
            await create_acls(admin, wanted)

    run_client(bootstrap, run, timeout_s=_TIMEOUT_S, attempt=_ALTER)
    for acl in sorted(set(wanted)):
        click.echo(f"Added: {acl}")


def _convenience(resource_type: str, producer: bool, consumer: bool) -> list[str]:
    """kafka-acls' --producer and --consumer."""
    ops: list[str] = []
    if producer and resource_type == "TOPIC":
        ops += ["WRITE", "DESCRIBE", "CREATE"]
    if consumer:
        ops += ["READ", "DESCRIBE"] if resource_type == "TOPIC" else []
        ops += ["READ"] if resource_type == "GROUP" else []
    return ops


def _queries(
    principals: tuple[str, ...],
    operations: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    pattern_type: str | None,
    *,
    permission: str = "ANY",
    hosts: tuple[str, ...] = (),
) -> list[AclQuery]:
    kind = (pattern_type or "any" if (topics or groups or cluster) else "any").upper()
    patterns: list[tuple[str, str | None, str]] = list(
        _patterns(topics, groups, cluster, kind)
    ) or [("ANY", None, "ANY")]
    ops = [_operation(o) for o in operations] or ["ANY"]
    return [
        AclQuery(rtype, name, ptype, principal, host, op, permission)
        for rtype, name, ptype in patterns
        for principal in (principals or (None,))
        for host in (hosts or (None,))
        for op in ops
    ]


@acls.command("remove")
@bootstrap_option
@_principals
@_resources
@click.option("--force", is_flag=True, help="Accepted for kafka-acls' sake: never asks.")
def remove(
    bootstrap: str,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...],
    operations: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    pattern_type: str | None,
    force: bool,
) -> None:
    """Remove the ACLs matching the resources, principals and operations named."""
    if not (topics or groups or cluster):
        fail("name the resources: --topic, --group or --cluster")
    # As kafka-acls: --allow-principal removes ALLOW bindings, --deny-principal DENY ones
    # (each with its own hosts); with neither, every binding of the resources.
    queries: list[AclQuery] = []
    for permission, principals, hosts in (
        ("ALLOW", allow_principals, allow_hosts),
        ("DENY", deny_principals, deny_hosts),
    ):
        if principals:
            queries += _queries(
                principals, operations, topics, groups, cluster, pattern_type,
                permission=permission, hosts=hosts,
            )  # fmt: skip
    if not queries:
        queries = _queries((), operations, topics, groups, cluster, pattern_type)

    async def run() -> list[Acl]:
        async with _admin(bootstrap) as admin:
            return await delete_acls(admin, queries)

    removed = run_client(bootstrap, run, timeout_s=_TIMEOUT_S, attempt=_ALTER)
    for acl in removed:
        click.echo(f"Removed: {acl}")
    click.echo(f"{len(removed)} ACLs removed", err=True)


@acls.command("list")
@bootstrap_option
@click.option("--principal", "principals", multiple=True, metavar="User:NAME")
@_resources
@click.option("-J", "--json", "as_json", is_flag=True, help="One JSON array of bindings.")
def list_acls(
    bootstrap: str,
    principals: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    pattern_type: str | None,
    as_json: bool,
) -> None:
    """List ACLs (all, or those of the resources and principals named)."""
    queries = _queries(principals, (), topics, groups, cluster, pattern_type)

    async def run() -> list[Acl]:
        async with _admin(bootstrap) as admin:
            found: set[Acl] = set()
            for query in queries:
                found.update(await describe_acls(admin, query))
            return sorted(found)

    found = run_client(bootstrap, run, timeout_s=_TIMEOUT_S, attempt=_DESCRIBE)
    if as_json:
        click.echo(
            json.dumps([a.__dict__ if hasattr(a, "__dict__") else _as_dict(a) for a in found])
        )
        return
    for acl in found:
        click.echo(str(acl))
    click.echo(f"{len(found)} ACLs", err=True)


def _as_dict(acl: Acl) -> dict[str, str]:
    return {f: getattr(acl, f) for f in Acl.__slots__}
