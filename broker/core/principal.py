"""Principals (Kafka's KafkaPrincipal, `User:name`) and `super.users`, which lists them. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANONYMOUS",
    "USER_TYPE",
    "WILDCARD_PRINCIPAL",
    "Principal",
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
