"""`-X key=value`, `--producer-property`, `--consumer-property`: client settings by Kafka's names.

Each known name is an entry of the clients' settings table (client/settings.py): a keyword
argument of client.producer.Producer or client.consumer.Consumer, with its value parsed; an
unknown name is an error that lists the known ones (Kafka only warns, but a typo silently
ignored is worse on a command line). The
admin commands take theirs from `--command-config` (ADMIN_PROPERTIES), beside its security
settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from client.cli.common import parse_bootstrap
from client.settings import ADMIN_SETTINGS, CONSUMER_SETTINGS, PRODUCER_SETTINGS, ClientSetting
from protocol.java_properties import parse_properties as parse_java_properties

__all__ = [
    "ADMIN_PROPERTIES",
    "CONSUMER_PROPERTIES",
    "PRODUCER_PROPERTIES",
    "PropertyError",
    "parse_properties",
    "read_properties_file",
]


class PropertyError(ValueError):
    """A -X setting that is not key=value, unknown, or has a bad value."""


def _bootstrap(text: str) -> str:
    parse_bootstrap(text)
    return text


def _known(settings: Iterable[ClientSetting]) -> Mapping[str, tuple[str, Callable[[str], Any]]]:
    """Kafka name -> (keyword argument, parser), from the clients' settings table; the CLI
    checks bootstrap.servers as its -b option does."""
    return {
        s.key: (s.attribute, _bootstrap if s.key == "bootstrap.servers" else s.parse)
        for s in sorted(settings, key=lambda s: s.key)
    }


PRODUCER_PROPERTIES: Final = _known(PRODUCER_SETTINGS)
CONSUMER_PROPERTIES: Final = _known(CONSUMER_SETTINGS)
# What client.admin.Admin takes from --command-config, as Kafka's tools give that file to their
# AdminClient; its other names there are the security settings (client.security).
ADMIN_PROPERTIES: Final = _known(s for s in ADMIN_SETTINGS if s.key != "bootstrap.servers")
_NOT_YET: Final = {"transactional.id": "transactions are not available"}


def parse_properties(
    settings: Iterable[str], known: Mapping[str, tuple[str, Callable[[str], Any]]], kind: str
) -> dict[str, Any]:
    """`key=value` strings -> keyword arguments (a later setting of a key wins)."""
    kwargs: dict[str, Any] = {}
    for setting in settings:
        name, found, text = setting.partition("=")
        name = name.strip()
        if not found or not name:
            raise PropertyError(f"{setting!r} is not key=value")
        if name in _NOT_YET:
            raise PropertyError(f"{name}: {_NOT_YET[name]}")
        if name not in known:
            raise PropertyError(f"unknown {kind} property {name!r} (known: {', '.join(known)})")
        argument, parse = known[name]
        try:
            kwargs[argument] = parse(text.strip())
        except ValueError as exc:
            raise PropertyError(f"{name}={text}: {exc}") from exc
    return kwargs


def read_properties_file(path: Path) -> dict[str, str]:
    """A java .properties file (Kafka's --command-config), read as the broker reads its
    server.properties (protocol.java_properties). OSError if unreadable, ValueError
    (PropertiesFormatError) naming the line if malformed."""
    return parse_java_properties(path.read_text(encoding="utf-8"), source=str(path))
