"""Kafka's `sasl.jaas.config` line, as clients and brokers both read it (Kafka's JaasConfig):
`<LoginModule> required username="..." password="...";`. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["JaasLogin", "parse_jaas_login"]


@dataclass(frozen=True, slots=True)
class JaasLogin:
    """A login from a JAAS line: its module (SCRAM or PLAIN) and the credentials."""

    module: str
    username: str
    password: str = field(repr=False)


_JAAS: Final = re.compile(
    r"\s*(?P<module>[A-Za-z0-9_.$]+)\s+(?:required|requisite|sufficient|optional)"
    r"(?P<options>.*?);?\s*"
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
