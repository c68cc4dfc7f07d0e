"""Kafka's named listeners: `listeners`, `advertised.listeners`, `listener.security.protocol.map`
and `inter.broker.listener.name`, plus Highwater's `listener.wire.protocol.map` (which wire a
listener speaks: Highwater's msgpack, the default, or Kafka's), parsed into one `Listener`
per name. Pure.

A listener has a name, a security protocol (from the map), where it binds and what it
advertises (advertised.listeners for that name, else its own address). docs/operations.md
("Security") has the rules; each failure is an `InvalidValue` saying what was expected.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from broker.config.config_def import InvalidValue, Value

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "LISTENERS_SYNTAX",
    "PROTOCOL_MAP_SYNTAX",
    "WIRES",
    "WIRE_MAP_SYNTAX",
    "Listener",
    "ListenerAddress",
    "Mismatch",
    "SecurityProtocol",
    "check_listener_list",
    "check_protocol_map",
    "check_wire_map",
    "parse_listener_list",
    "parse_protocol_map",
    "parse_wire_map",
    "resolve_listeners",
]


class SecurityProtocol(enum.StrEnum):
    """Kafka's SecurityProtocol names (and what each listener speaks)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP: Final = ",".join(f"{p}:{p}" for p in SecurityProtocol)
LISTENERS_SYNTAX: Final = "NAME://host:port[,NAME://host:port...]"
PROTOCOL_MAP_SYNTAX: Final = "NAME:PROTOCOL[,NAME:PROTOCOL...]"
WIRE_MAP_SYNTAX: Final = "NAME:WIRE[,NAME:WIRE...]"
NATIVE_WIRE: Final = "highwater"
WIRES: Final = (NATIVE_WIRE, "kafka")  # a listener left out of the map speaks Highwater's

_LISTENER: Final = re.compile(
    r"(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ipv6>[0-9A-Fa-f:.%A-Za-z]+)\]|(?P<host>[A-Za-z0-9.\-_]*))"
    r":(?P<port>[0-9]{1,5})"
)
_LISTENERS_EXPECTED: Final = (
    "a comma-separated list of NAME://host:port, each name once (host may be empty for every "
    "interface, IPv6 in brackets), e.g. PLAINTEXT://127.0.0.1:9092"
)
_NAME: Final = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True, slots=True)
class ListenerAddress:
    name: str  # upper case, as Kafka normalises it
    host: str  # "" when the URL leaves it empty
    port: int


@dataclass(frozen=True, slots=True)
class Listener:
    """One named listener: its protocol, where it binds and what it registers for clients."""

    name: str
    security_protocol: SecurityProtocol
    host: str  # bind address ("0.0.0.0" for every interface)
    port: int  # 0: any free port
    advertised_host: str
    advertised_port: int  # 0 only when the bound port is advertised
    wire: str = NATIVE_WIRE  # one of WIRES


def parse_listener_list(text: str) -> tuple[ListenerAddress, ...]:
    """`NAME://host:port,...` (listeners or advertised.listeners syntax), names unique."""
    found: list[ListenerAddress] = []
    for entry in (e.strip() for e in text.split(",")):
        match = _LISTENER.fullmatch(entry)
        if match is None or int(match["port"]) > 65535:
            raise InvalidValue(_LISTENERS_EXPECTED)
        name = match["name"].upper()
        if any(a.name == name for a in found):
            raise InvalidValue(_LISTENERS_EXPECTED + f" ({name} is named twice)")
        host = match["ipv6"] if match["ipv6"] is not None else match["host"]
        found.append(ListenerAddress(name, host, int(match["port"])))
    return tuple(found)


def check_listener_list(value: Value) -> None:
    parse_listener_list(str(value))


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """listener.security.protocol.map: `NAME:PROTOCOL,...` -> {NAME: protocol}."""
    expected = (
        f"{PROTOCOL_MAP_SYNTAX} with protocols among {', '.join(SecurityProtocol)}, each name once"
    )
    mapping: dict[str, SecurityProtocol] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or _NAME.fullmatch(name) is None or name in mapping:
            raise InvalidValue(expected)
        try:
            mapping[name] = SecurityProtocol(protocol)
        except ValueError:
            raise InvalidValue(expected) from None
    if not mapping:
        raise InvalidValue(expected)
    return mapping


def check_protocol_map(value: Value) -> None:
    parse_protocol_map(str(value))


def parse_wire_map(text: str) -> dict[str, str]:
    """listener.wire.protocol.map: `NAME:WIRE,...` -> {NAME: wire}; empty: {}."""
    expected = f"{WIRE_MAP_SYNTAX} with wires among {', '.join(WIRES)}, each name once"
    mapping: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, sep, wire = entry.partition(":")
        name, wire = name.strip().upper(), wire.strip().lower()
        if not sep or _NAME.fullmatch(name) is None or name in mapping or wire not in WIRES:
            raise InvalidValue(expected)
        mapping[name] = wire
    return mapping


def check_wire_map(value: Value) -> None:
    parse_wire_map(str(value))


def resolve_listeners(
    listeners: tuple[ListenerAddress, ...],
    advertised: tuple[ListenerAddress, ...],
    protocols: Mapping[str, SecurityProtocol],
    hostname: str,
    wires: Mapping[str, str] | None = None,
) -> tuple[Listener, ...]:
    """Join the settings. Raises `Mismatch` naming the setting at fault."""
    wires = wires or {}
    bound = {a.name: a for a in listeners}
    for address in advertised:
        if address.name not in bound:
            raise Mismatch(
                "advertised.listeners",
                f"only names that listeners has ({', '.join(bound)}), not {address.name}",
            )
        if address.port == 0:
            raise Mismatch("advertised.listeners", "a port from 1 to 65535")
    ports = [a.port for a in listeners if a.port != 0]
    if len(ports) != len(set(ports)):
        raise Mismatch("listeners", "a different port for each listener")
    by_name = {a.name: a for a in advertised}
    resolved = []
    for address in listeners:
        protocol = protocols.get(address.name)
        if protocol is None:
            raise Mismatch(
                "listener.security.protocol.map",
                f"a security protocol for the listener {address.name} (e.g. "
                f"{address.name}:PLAINTEXT)",
            )
        shown = by_name.get(address.name, address)
        source = "advertised.listeners" if address.name in by_name else "listeners"
        if shown.host in ("0.0.0.0", "::"):
            hint = " (advertised.listeners defaults to listeners: set it)"
            raise Mismatch(
                source,
                f"a routable advertised host, not the wildcard {shown.host}"
                + (hint if source == "listeners" else ""),
            )
        resolved.append(
            Listener(
                address.name,
                protocol,
                address.host or "0.0.0.0",  # NAME://:9092 binds every interface
                address.port,
                shown.host or hostname,  # Kafka registers the canonical host name then
                shown.port,
                wires.get(address.name, NATIVE_WIRE),
            )
        )
    return tuple(resolved)


class Mismatch(ValueError):
    """Settings that parse alone but not together: `key` is the one to fix."""

    def __init__(self, key: str, expected: str) -> None:
        super().__init__(expected)
        self.key = key
        self.expected = expected
