"""What one setting is (Kafka's ConfigDef entry), how its value parses, and the value syntaxes.

settings.py holds the table of the broker's settings, topic_config.py the topic configs;
both are made of `Setting`s, so a value is parsed and checked the same way wherever it
comes from. A bad value raises `InvalidValue` with what was expected; callers name the key.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "PER_IP_OVERRIDES_SYNTAX",
    "ZK_SYNTAX",
    "Fallback",
    "InvalidValue",
    "Setting",
    "Type",
    "Value",
    "boolean",
    "check_directories",
    "check_metrics_listener",
    "check_per_ip_overrides",
    "check_zookeeper_connect",
    "double",
    "format_value",
    "is_loopback",
    "metrics_listener_uses_tls",
    "number",
    "parse_metrics_listener",
    "parse_per_ip_overrides",
    "string",
    "strings",
]

INT_MAX: Final = (1 << 31) - 1  # Java int
LONG_MAX: Final = (1 << 63) - 1  # Java long; Kafka's "never" for the flush settings
_JAVA_INTEGER: Final = re.compile(r"[+-]?[0-9]+")  # Integer/Long.parseLong: no "_", no spaces

# A parsed value: INT/LONG -> int, BOOLEAN -> bool, STRING -> str, LIST -> tuple of str.
Value = int | bool | float | str | tuple[str, ...]


class InvalidValue(ValueError):
    """A value does not parse or is out of bounds; `expected` says what would have been valid."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


class Type(enum.Enum):
    INT = "int"
    LONG = "long"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    DOUBLE = "double"


@dataclass(frozen=True, slots=True)
class Fallback:
    """Unset, a setting takes `key`'s value times `factor` (a negative value, -1, stays -1)."""

    key: str
    factor: int = 1


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting. `default` None means: required, null, or `fallback`'s value when unset."""

    key: str  # Kafka's name
    type: Type
    default: Value | None
    doc: str  # one line, for docs/operations.md
    attr: str | None = None  # the BrokerConfig attribute holding its effective value
    minimum: int = 0  # INT/LONG bounds, inclusive (see `number`)
    maximum: int = 0
    choices: tuple[str, ...] = ()  # STRING: the only values accepted (case-sensitive)
    syntax: str = ""  # STRING/LIST: what a value looks like
    check: Callable[[Value], None] | None = None  # further checks; raises InvalidValue
    fallback: Fallback | None = None
    required: bool = False
    log_field: str | None = None  # the LogConfig field it sets
    section: str = ""  # heading it is listed under in the docs
    # Kafka's "cluster-wide" update mode: settable as a dynamic cluster-wide default
    # (IncrementalAlterConfigs, BROKER resource ""), which every broker applies at once.
    dynamic: bool = False

    def __post_init__(self) -> None:
        if self.type in (Type.INT, Type.LONG) and self.maximum < self.minimum:
            raise ValueError(f"{self.key}: no valid value (maximum < minimum); see number()")

    def parse(self, text: str) -> Value | None:
        """The typed value of `text` (None: the empty value of a nullable string)."""
        value = self._parse_type(text)
        if value is not None and self.check is not None:
            self.check(value)
        return value

    def _parse_type(self, text: str) -> Value | None:
        if self.type in (Type.INT, Type.LONG):
            if _JAVA_INTEGER.fullmatch(text) is None:
                raise InvalidValue(self.expected)
            number = int(text)
            if not self.minimum <= number <= self.maximum:
                raise InvalidValue(self.expected)
            return number
        if self.type is Type.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise InvalidValue(self.expected)
            return text.lower() == "true"
        if self.type is Type.DOUBLE:
            try:
                double = float(text)
            except ValueError:
                raise InvalidValue(self.expected) from None
            if not self.minimum <= double <= self.maximum:  # NaN fails this too
                raise InvalidValue(self.expected)
            return double
        if self.type is Type.LIST:  # Kafka's parseCsvList: trimmed, empty items dropped
            return tuple(item.strip() for item in text.split(",") if item.strip())
        if self.choices and text not in self.choices:
            raise InvalidValue(self.expected)
        if not text and self.nullable:
            return None  # Kafka's null
        return text

    @property
    def nullable(self) -> bool:
        """A string whose unset value is null: an empty value means null too."""
        return self.default is None and not self.required and self.fallback is None

    @property
    def expected(self) -> str:
        """What a valid value is, as error messages put it."""
        if self.type in (Type.INT, Type.LONG):
            if self.maximum in (INT_MAX, LONG_MAX):
                kind = "an integer" if self.maximum == INT_MAX else "a long integer"
                extra = " (-1: no limit)" if self.minimum == -1 else ""
                return f"{kind} >= {self.minimum}{extra}"
            return f"an integer from {self.minimum} to {self.maximum}"
        if self.type is Type.BOOLEAN:
            return "true or false"
        if self.type is Type.DOUBLE:
            return f"a number from {self.minimum} to {self.maximum}"
        if self.choices:
            return f"one of: {', '.join(self.choices)}"
        return self.syntax or "a value"

    @property
    def valid_values(self) -> str:
        """What a valid value is, tersely, for the docs' tables."""
        if self.type in (Type.INT, Type.LONG):
            if self.maximum in (INT_MAX, LONG_MAX):
                return f">= {self.minimum}"
            return f"{self.minimum} to {self.maximum}"
        if self.type is Type.BOOLEAN:
            return "true, false"
        if self.type is Type.DOUBLE:
            return f"{self.minimum} to {self.maximum}"
        if self.choices:
            return ", ".join(self.choices)
        return self.syntax


def format_value(value: Value | None) -> str:
    """A value as server.properties would spell it (null: "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


# --- value syntaxes checked beyond their type ---------------------------------------------------

_HTTP_LISTENER: Final = re.compile(
    r"(?P<scheme>https?)://(?:\[(?P<ipv6>[0-9A-Fa-f:.%A-Za-z]+)\]|(?P<host>[A-Za-z0-9.\-_]*)):(?P<port>[0-9]{1,5})/?"
)


def parse_metrics_listener(text: str) -> tuple[str, int]:
    """(host, port) of an http(s)://host:port listener; host "" binds every interface."""
    match = _metrics_listener(text)
    host = match["ipv6"] if match["ipv6"] is not None else match["host"]
    return host, int(match["port"])


def metrics_listener_uses_tls(text: str) -> bool:
    """Whether the listener is https://."""
    return _metrics_listener(text)["scheme"] == "https"


def _metrics_listener(text: str) -> re.Match[str]:
    match = _HTTP_LISTENER.fullmatch(text.strip())
    if match is None or int(match["port"]) > 65535:
        raise InvalidValue(
            "http://host:port or https://host:port (host may be empty for every interface, "
            "IPv6 in brackets; port 0 picks a free port)"
        )
    return match


def is_loopback(host: str) -> bool:
    """Whether a listener bound to `host` is reachable only from this machine: a loopback
    address or `localhost`. Other names count as reachable (they may resolve anywhere), and
    "" binds every interface."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.partition("%")[0]).is_loopback
    except ValueError:
        return False


def check_metrics_listener(value: Value) -> None:
    parse_metrics_listener(str(value))


_ZK_HOST: Final = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)(?::(?P<port>[0-9]{1,5}))?")
ZK_SYNTAX: Final = "host:port[,host:port...][/chroot]"


def check_zookeeper_connect(value: Value) -> None:
    """ZooKeeper's connect string; a host's port defaults to 2181."""
    expected = f"{ZK_SYNTAX}, e.g. 127.0.0.1:2181 or zk1:2181,zk2:2181/kafka"
    hosts, slash, chroot = str(value).partition("/")
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise InvalidValue(expected)
    for host in hosts.split(","):
        match = _ZK_HOST.fullmatch(host.strip())
        if match is None or (match["port"] is not None and not 0 < int(match["port"]) <= 65535):
            raise InvalidValue(expected)


PER_IP_OVERRIDES_SYNTAX: Final = "host:count[,host:count...]"


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: host (a name or address; IPv6 as is, its count after
    the last colon) -> connections allowed."""
    overrides: dict[str, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        host, colon, count = item.strip().rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not colon or not host or _JAVA_INTEGER.fullmatch(count.strip()) is None:
            raise InvalidValue(f"{PER_IP_OVERRIDES_SYNTAX}, each count an integer >= 0")
        number = int(count)
        if not 0 <= number <= INT_MAX:
            raise InvalidValue(f"{PER_IP_OVERRIDES_SYNTAX}, each count an integer >= 0")
        overrides[host] = number
    return overrides


def check_per_ip_overrides(value: Value) -> None:
    parse_per_ip_overrides(str(value))


def check_directories(value: Value) -> None:
    if not value:
        raise InvalidValue("a comma-separated list of one or more directories")
    if isinstance(value, tuple) and len(set(value)) != len(value):
        raise InvalidValue("distinct directories")


# --- constructors: what most settings leave out is filled in ------------------------------------

_DERIVED: Final = "<the key, dots as underscores>"  # the usual attribute name (units last)


def number(
    type_: Type,
    key: str,
    default: int | None,
    doc: str,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    attr: str | None = _DERIVED,
    fallback: Fallback | None = None,
    required: bool = False,
    log_field: str | None = None,
    dynamic: bool = False,
) -> Setting:
    """An INT or LONG setting; `maximum` defaults to the type's largest value."""
    if maximum is None:
        maximum = INT_MAX if type_ is Type.INT else LONG_MAX
    return Setting(
        key,
        type_,
        default,
        doc,
        _attr(key, attr),
        minimum=minimum,
        maximum=maximum,
        fallback=fallback,
        required=required,
        log_field=log_field,
        dynamic=dynamic,
    )


def double(
    key: str,
    default: float,
    doc: str,
    *,
    minimum: int,
    maximum: int,
    attr: str | None = _DERIVED,
    log_field: str | None = None,
    dynamic: bool = False,
) -> Setting:
    return Setting(
        key,
        Type.DOUBLE,
        default,
        doc,
        _attr(key, attr),
        minimum=minimum,
        maximum=maximum,
        log_field=log_field,
        dynamic=dynamic,
    )


def boolean(key: str, default: bool, doc: str, *, dynamic: bool = False) -> Setting:
    return Setting(key, Type.BOOLEAN, default, doc, _attr(key, _DERIVED), dynamic=dynamic)


def string(
    key: str,
    default: str | None,
    doc: str,
    *,
    syntax: str = "",
    choices: tuple[str, ...] = (),
    check: Callable[[Value], None] | None = None,
    attr: str | None = _DERIVED,
    fallback: Fallback | None = None,
    required: bool = False,
) -> Setting:
    return Setting(
        key,
        Type.STRING,
        default,
        doc,
        _attr(key, attr),
        syntax=syntax,
        choices=choices,
        check=check,
        fallback=fallback,
        required=required,
    )


def strings(
    key: str,
    default: tuple[str, ...] | None,
    doc: str,
    *,
    syntax: str,
    check: Callable[[Value], None] | None = None,
    attr: str | None = _DERIVED,
    fallback: Fallback | None = None,
    log_field: str | None = None,
    dynamic: bool = False,
) -> Setting:
    """A LIST setting: comma-separated strings."""
    return Setting(
        key,
        Type.LIST,
        default,
        doc,
        _attr(key, attr),
        syntax=syntax,
        check=check,
        fallback=fallback,
        log_field=log_field,
        dynamic=dynamic,
    )


def _attr(key: str, attr: str | None) -> str | None:
    return key.replace(".", "_") if attr == _DERIVED else attr
