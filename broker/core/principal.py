"""Principals (Kafka's KafkaPrincipal, `User:name`) and the two settings that spell them:
`super.users` and the JAAS line of `sasl.jaas.config`. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANONYMOUS",
    "USER_TYPE",
    "WILDCARD_PRINCIPAL",
    "JaasLogin",
    "Principal",
    "parse_jaas_login",
    "parse_principal",
    "parse_super_users",
]

USER_TYPE: Final = "User"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection is: `User:alice` after SASL, `User:CN=alice,O=...` after mutual TLS,
    `User:ANONYMOUS` on a PLAINTEXT listener (Kafka's KafkaPrincipal.ANONYMOUS)."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS: Final = Principal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL: Final = Principal(USER_TYPE, "*")


def parse_principal(text: str) -> Principal:
    """`Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError otherwise."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"{text!r} is not a principal (expected Type:name, e.g. User:alice)")
    return Principal(kind, name)


def parse_super_users(text: str) -> frozenset[Principal]:
    """`User:a;User:b` (semicolons, as Kafka: a certificate DN holds commas)."""
    return frozenset(parse_principal(item) for item in text.split(";") if item.strip())


@dataclass(frozen=True, slots=True)
class JaasLogin:
    """A client login from a JAAS line: which module (SCRAM or PLAIN) and the credentials."""

    module: str
    username: str
    password: str


_JAAS: Final = re.compile(
    r"\s*(?P<module>[A-Za-z0-9_.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*"
)
_OPTION: Final = re.compile(
    r'\s*(?P<key>[A-Za-z0-9_.]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";]+))'
)


def parse_jaas_login(text: str) -> JaasLogin:
    """Kafka's `sasl.jaas.config` line, e.g. `org.apache.kafka.common.security.scram.
    ScramLoginModule required username="alice" password="secret";`. ValueError otherwise."""
    match = _JAAS.fullmatch(text)
    if match is None:
        raise ValueError('expected `<LoginModule> required username="..." password="...";`')
    options: dict[str, str] = {}
    rest = match["options"]
    position = 0
    while rest[position:].strip():
        option = _OPTION.match(rest, position)
        if option is None:
            raise ValueError(f"cannot read the options at {rest[position:].strip()!r}")
        value = option["quoted"] if option["quoted"] is not None else option["bare"]
        options[option["key"]] = re.sub(r"\\(.)", r"\1", value)
        position = option.end()
    if not options.get("username") or "password" not in options:
        raise ValueError("username and password are both needed")
    return JaasLogin(match["module"], options["username"], options["password"])
