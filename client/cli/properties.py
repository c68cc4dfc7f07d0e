"""`-X key=value`, `--producer-property`, `--consumer-property`: client settings by Kafka's names.

Each known name maps to a keyword argument of client.producer.Producer or
client.consumer.Consumer, with its value parsed; an unknown name is an error that lists the
known ones (Kafka only warns, but a typo silently ignored is worse on a command line). The
admin commands take theirs from `--command-config` (ADMIN_PROPERTIES), beside its security
settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from client.cli.common import parse_bootstrap
from protocol.compression import codec_named
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


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return text.lower() == "true"


def _acks(text: str) -> int:
    if text.lower() == "all":
        return -1
    if text not in ("-1", "0", "1"):
        raise ValueError("expected all, -1, 0 or 1")
    return int(text)


def _compression(text: str) -> str:
    return codec_named(text).name.lower()


def _offset_reset(text: str) -> str:
    if text not in ("earliest", "latest", "none"):
        raise ValueError("expected earliest, latest or none")
    return text


def _non_empty(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    return text


def _bootstrap(text: str) -> str:
    parse_bootstrap(text)
    return text


def _non_negative(kind: Callable[[str], float | int], what: str) -> Callable[[str], Any]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"expected {what}") from None
        if value < 0:
            raise ValueError("must not be negative")
        return value

    return parse


_INT, _MS = _non_negative(int, "a whole number"), _non_negative(float, "a number")

# Kafka name -> (keyword argument, parser)
PRODUCER_PROPERTIES: Final[Mapping[str, tuple[str, Callable[[str], Any]]]] = {
    "acks": ("acks", _acks),
    "batch.size": ("batch_size", _INT),
    "bootstrap.servers": ("bootstrap", _bootstrap),
    "buffer.memory": ("buffer_memory", _INT),
    "client.id": ("client_id", str),
    "compression.type": ("compression", _compression),
    "delivery.timeout.ms": ("delivery_timeout_ms", _MS),
    "enable.idempotence": ("enable_idempotence", _boolean),
    "linger.ms": ("linger_ms", _MS),
    "max.block.ms": ("max_block_ms", _MS),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", _INT),
    "max.request.size": ("max_request_size", _INT),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "retries": ("retries", _INT),
    "retry.backoff.ms": ("retry_backoff_ms", _MS),
}
CONSUMER_PROPERTIES: Final[Mapping[str, tuple[str, Callable[[str], Any]]]] = {
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _INT),
    "auto.offset.reset": ("auto_offset_reset", _offset_reset),
    "bootstrap.servers": ("bootstrap", _bootstrap),
    "client.id": ("client_id", str),
    "default.api.timeout.ms": ("default_api_timeout_ms", _INT),
    "enable.auto.commit": ("enable_auto_commit", _boolean),
    "fetch.max.bytes": ("fetch_max_bytes", _INT),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _INT),
    "fetch.min.bytes": ("fetch_min_bytes", _INT),
    "group.id": ("group_id", _non_empty),
    "group.instance.id": ("group_instance_id", _non_empty),
    "group.remote.assignor": ("group_remote_assignor", _non_empty),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _INT),
    "max.poll.interval.ms": ("max_poll_interval_ms", _INT),
    "max.poll.records": ("max_poll_records", _INT),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", _INT),
    "retry.backoff.ms": ("retry_backoff_ms", _INT),
}
# What client.admin.Admin takes from --command-config, as Kafka's tools give that file to their
# AdminClient; its other names there are the security settings (client.security).
ADMIN_PROPERTIES: Final[Mapping[str, tuple[str, Callable[[str], Any]]]] = {
    "client.id": ("client_id", _non_empty),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "retry.backoff.ms": ("retry_backoff_ms", _INT),
}
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
