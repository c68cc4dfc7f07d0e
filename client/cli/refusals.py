"""An authorization refusal as one line saying who may not do what, and the grant that fixes it.

A broker's TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED names neither the principal nor the
operation (Kafka's own is "Not authorized to access topics: [sec]"). The CLI knows both: its
principal is the SASL user of --command-config (User:ANONYMOUS without SASL or a client
certificate, as Kafka's DefaultKafkaPrincipalBuilder), and each command says what it attempts
(an `Attempt`). So `consume sec --group ag` refused prints

    User:alice may not READ topic sec (and group ag; TOPIC_AUTHORIZATION_FAILED):
    `highwater acls add --allow-principal User:alice --consumer --topic sec --group ag`

on one line: kafka-acls' --consumer / --producer where the attempt is a consumer's or a
producer's, else `--operation Op` on the refused resource. No I/O here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from client.errors import HighwaterClientError
from client.security import ClientSecurity
from protocol.errors import ErrorCode

__all__ = [
    "CLUSTER",
    "Attempt",
    "Need",
    "administering",
    "consuming",
    "principal_of",
    "producing",
    "refusal_line",
]

CLUSTER = "kafka-cluster"  # Kafka's one cluster resource name
# A broker without an authorizer refuses credential changes to all but super.users, and says
# so: there no ACL would help, so the broker's words are kept.
_NOT_AN_ACL = "only super.users"
ANONYMOUS = "User:ANONYMOUS"
_REFUSED_TYPE = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "topic",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "group",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}


@dataclass(frozen=True)
class Need:
    """An operation (Kafka's name: READ, DESCRIBE_CONFIGS, ...) on resources of one type."""

    operation: str
    resource_type: str  # "topic", "group" or "cluster"
    names: tuple[str, ...] = (CLUSTER,)

    def described(self) -> str:
        if self.resource_type == "cluster":
            return f"cluster {CLUSTER}"
        plural = "s" if len(self.names) > 1 else ""
        return f"{self.resource_type}{plural} {', '.join(self.names)}"

    def resource_flags(self) -> list[str]:
        if self.resource_type == "cluster":
            return ["--cluster"]
        return [part for name in self.names for part in (f"--{self.resource_type}", name)]


@dataclass(frozen=True)
class Attempt:
    """What a command attempts; `grant`: kafka-acls' flag granting every need at once
    (--consumer, --producer), or None: `--operation` for the refused need alone."""

    needs: tuple[Need, ...]
    grant: str | None = None


def consuming(topics: tuple[str, ...], group: str | None) -> Attempt:
    """READ (and DESCRIBE) on the topics; READ on the group, if any (kafka-acls --consumer)."""
    needs = [Need("READ", "topic", topics)] if topics else []
    if group is not None:
        needs.append(Need("READ", "group", (group,)))
    return Attempt(tuple(needs), "--consumer")


def producing(topic: str) -> Attempt:
    """WRITE (and DESCRIBE, CREATE) on the topic (kafka-acls --producer)."""
    return Attempt((Need("WRITE", "topic", (topic,)),), "--producer")


def administering(*needs: Need) -> Attempt:
    return Attempt(tuple(needs))


def principal_of(security: ClientSecurity | None) -> str | None:
    """The principal the brokers see: "User:<sasl.username>", User:ANONYMOUS without SASL;
    None with a client certificate and no SASL (its subject is the principal, not known here)."""
    if security is None:
        return ANONYMOUS
    if security.uses_sasl:
        return f"User:{security.username}"
    if security.uses_tls and security.ssl_certfile:
        return None
    return ANONYMOUS


def refusal_line(
    error: HighwaterClientError, principal: str | None, attempt: Attempt
) -> str | None:
    """The line for an authorization refusal of `attempt`, or None (not such a refusal, or one
    the attempt cannot explain: the caller keeps the error's own message)."""
    refused_type = _REFUSED_TYPE.get(error.code) if error.code is not None else None
    refused = [n for n in attempt.needs if n.resource_type == refused_type]
    if principal is None or error.code is None or not refused or _NOT_AN_ACL in str(error):
        return None
    first = refused[0]
    others = [
        f"and {'' if n.operation == first.operation else n.operation + ' '}{n.described()}"
        for n in attempt.needs
        if n is not first and attempt.grant is not None
    ]
    grant = ["highwater", "acls", "add", "--allow-principal", principal]
    if attempt.grant is not None:
        grant.append(attempt.grant)
        grant += [flag for need in attempt.needs for flag in need.resource_flags()]
    else:
        grant += ["--operation", _flag_operation(first.operation), *first.resource_flags()]
    why = "; ".join([*others, error.code.name])
    command = " ".join(shlex.quote(part) for part in grant)
    return f"{principal} may not {first.operation} {first.described()} ({why}): `{command}`"


def _flag_operation(name: str) -> str:
    """kafka-acls' spelling: DESCRIBE_CONFIGS -> DescribeConfigs."""
    return "".join(part.capitalize() for part in name.split("_"))
