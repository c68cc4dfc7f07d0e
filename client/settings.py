"""The clients' settings: one entry each (Kafka's name, keyword argument, type, default, doc).

Producer, Consumer and Admin take their defaults from here (client/producer/config.py,
client/consumer/config.py), the CLI parses `-X key=value` and `--command-config` with the
same entries (client/cli/properties.py), and docs/client-settings.md is rendered from it
(`python -m client.settings_doc`). Only what Highwater's clients do is listed, by Kafka's
names and with Kafka's defaults (ProducerConfig, ConsumerConfig and AdminClientConfig), except
where an entry's doc says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from protocol.compression import codec_named

__all__ = [
    "ADMIN_SETTINGS",
    "CONSUMER_SETTINGS",
    "DELIVERY_TIMEOUT_MS",
    "FETCH_MAX_WAIT_MS",
    "MAX_POLL_INTERVAL_MS",
    "MAX_POLL_RECORDS",
    "MAX_REQUEST_SIZE",
    "METADATA_MAX_AGE_MS",
    "PRODUCER_SETTINGS",
    "REQUEST_TIMEOUT_MS",
    "RETRY_BACKOFF_MAX_MS",
    "RETRY_BACKOFF_MS",
    "ClientSetting",
    "Value",
    "default_bool",
    "default_float",
    "default_int",
    "default_str",
    "parse_acks",
]

# A parsed value, as the clients' keyword arguments take it.
Value = int | float | bool | str


@dataclass(frozen=True, slots=True)
class ClientSetting:
    """One client setting. `default` is spelled as in a .properties file (None: required, or
    no value); `parse` turns such text into the keyword argument's value (ValueError: bad)."""

    key: str  # Kafka's name
    attribute: str  # the keyword argument of Producer, Consumer or Admin
    type: str  # Kafka's ConfigDef type: int, long, double, boolean, string
    default: str | None
    parse: Callable[[str], Value]
    doc: str
    valid_values: str = ""

    def default_value(self) -> Value | None:
        return None if self.default is None else self.parse(self.default)


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return text.lower() == "true"


def parse_acks(text: str) -> int:
    """Kafka's acks: all (= -1), -1, 0 or 1."""
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


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError("expected a whole number") from None
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _non_negative_ms(text: str) -> float:
    """A duration the producer takes with fractions of a millisecond."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a number") from None
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _int(
    key: str, default: str, doc: str, kind: str = "int", valid_values: str = "[0,...]"
) -> ClientSetting:
    return ClientSetting(key, _attribute(key), kind, default, _non_negative_int, doc, valid_values)


def _ms(key: str, default: str, doc: str) -> ClientSetting:
    """A producer duration: Kafka's long, here also a fraction."""
    return ClientSetting(key, _attribute(key), "long", default, _non_negative_ms, doc, "[0,...]")


def _attribute(key: str) -> str:
    return key.replace(".", "_")


# --- shared by the clients -------------------------------------------------------------------

_BOOTSTRAP: Final = ClientSetting(
    "bootstrap.servers",
    "bootstrap",
    "list",
    None,
    str,
    "host:port[,host:port...] to learn the cluster from (the first argument of each client)",
)
_REQUEST_TIMEOUT: Final = _int(
    "request.timeout.ms",
    "30000",
    "how long a request may wait for its response before the connection is closed and the "
    "request retried or failed",
)
_RETRY_BACKOFF: Final = _int(
    "retry.backoff.ms", "100", "the wait before a failed request is tried again"
)
_METADATA_MAX_AGE: Final = _int(
    "metadata.max.age.ms",
    "300000",
    "metadata older than this is refreshed even without a reason to (new leaders, partitions)",
)


def _client_id(default: str, parse: Callable[[str], Value] = str) -> ClientSetting:
    return ClientSetting(
        "client.id",
        "client_id",
        "string",
        default,
        parse,
        "the name sent with every request (broker logs, quotas); Kafka's default is empty",
    )


# --- the producer (Kafka's ProducerConfig) ----------------------------------------------------

PRODUCER_SETTINGS: Final[tuple[ClientSetting, ...]] = (
    ClientSetting(
        "acks",
        "acks",
        "string",
        "all",
        parse_acks,
        "acknowledgements a produce waits for: 0 none, 1 the leader's, all (-1) every in-sync "
        "replica's",
        "all, -1, 0, 1",
    ),
    _int(
        "batch.size",
        "16384",
        "the most bytes of records a partition's batch collects before it is sent",
        valid_values="[1,...]",
    ),
    _BOOTSTRAP,
    _int(
        "buffer.memory",
        "33554432",
        "the most bytes of records waiting to be sent; send() waits (max.block.ms) when full",
        "long",
        "[1,...]",
    ),
    _client_id("highwater-producer"),
    ClientSetting(
        "compression.type",
        "compression",
        "string",
        "none",
        _compression,
        "the codec every batch is compressed with",
        "none, gzip, snappy, lz4, zstd",
    ),
    _ms(
        "delivery.timeout.ms",
        "120000",
        "how long after send() a record may wait for its acknowledgement, retries included",
    ),
    ClientSetting(
        "enable.idempotence",
        "enable_idempotence",
        "boolean",
        "true",
        _boolean,
        "a retried batch is stored once (KIP-98); left unset it is on unless acks, retries or "
        "max.in.flight.requests.per.connection conflict (Kafka 3.x), set true it refuses them",
    ),
    _ms(
        "linger.ms",
        "5",
        "how long a batch that is not full waits for more records before it is sent (5 as "
        "Kafka 4.0's, KIP-1030)",
    ),
    _ms(
        "max.block.ms",
        "60000",
        "how long send() may wait for a topic's metadata or for buffer memory",
    ),
    _int(
        "max.in.flight.requests.per.connection",
        "5",
        "produce requests sent to a broker without waiting for their answers (at most 5 with "
        "idempotence)",
        valid_values="[1,...]",
    ),
    _int(
        "max.request.size",
        "1048576",
        "the largest produce request, and so the largest record",
    ),
    _METADATA_MAX_AGE,
    _REQUEST_TIMEOUT,
    _int(
        "retries",
        "2147483647",
        "how often a failed batch is sent again (within delivery.timeout.ms)",
    ),
    _ms("retry.backoff.ms", "100", _RETRY_BACKOFF.doc),
)

# --- the consumer (Kafka's ConsumerConfig, the KIP-848 group protocol) -------------------------

CONSUMER_SETTINGS: Final[tuple[ClientSetting, ...]] = (
    _int(
        "auto.commit.interval.ms",
        "5000",
        "how often a group member commits its positions when enable.auto.commit is on",
    ),
    ClientSetting(
        "auto.offset.reset",
        "auto_offset_reset",
        "string",
        "latest",
        _offset_reset,
        "where a partition without a committed offset, or out of range, starts: earliest, "
        "latest, or none (an error)",
        "earliest, latest, none",
    ),
    _BOOTSTRAP,
    _client_id("highwater-consumer"),
    _int(
        "default.api.timeout.ms",
        "60000",
        "how long a call without a timeout of its own (commit, committed, positions) may take",
    ),
    ClientSetting(
        "enable.auto.commit",
        "enable_auto_commit",
        "boolean",
        "true",
        _boolean,
        "a group member commits its positions every auto.commit.interval.ms and at close",
    ),
    _int(
        "fetch.max.bytes",
        "52428800",
        "the most bytes one fetch answer holds",
    ),
    _int(
        "fetch.max.wait.ms",
        "500",
        "how long a broker holds a fetch that has less than fetch.min.bytes",
    ),
    _int("fetch.min.bytes", "1", "the bytes a fetch waits for (up to fetch.max.wait.ms)"),
    ClientSetting(
        "group.id",
        "group_id",
        "string",
        None,
        _non_empty,
        "the consumer group to join with subscribe() and commit for; none: assign() only",
    ),
    ClientSetting(
        "group.instance.id",
        "group_instance_id",
        "string",
        None,
        _non_empty,
        "a static member's id (KIP-345): rejoining with it keeps the member's partitions",
    ),
    ClientSetting(
        "group.remote.assignor",
        "group_remote_assignor",
        "string",
        None,
        _non_empty,
        "the coordinator's assignor to ask for (KIP-848); none: the broker's default",
        "uniform, range",
    ),
    _int(
        "max.partition.fetch.bytes",
        "1048576",
        "the most bytes one fetch answer holds per partition",
    ),
    _int(
        "max.poll.interval.ms",
        "300000",
        "a group member that does not poll for this long leaves its group (the rebalance "
        "timeout sent to the coordinator)",
    ),
    _int("max.poll.records", "500", "the most records one poll() returns"),
    _METADATA_MAX_AGE,
    _REQUEST_TIMEOUT,
    _int(
        "retry.backoff.max.ms",
        "1000",
        "the longest wait between retries, which double from retry.backoff.ms up to this",
    ),
    _RETRY_BACKOFF,
)

# --- the admin client (Kafka's AdminClientConfig): what Admin and --command-config take -------

ADMIN_SETTINGS: Final[tuple[ClientSetting, ...]] = (
    _BOOTSTRAP,
    _client_id("highwater-admin", _non_empty),
    _REQUEST_TIMEOUT,
    _RETRY_BACKOFF,
)

_TABLES: Final[Mapping[str, tuple[ClientSetting, ...]]] = {
    "producer": PRODUCER_SETTINGS,
    "consumer": CONSUMER_SETTINGS,
    "admin": ADMIN_SETTINGS,
}


def _default(client: str, key: str) -> Value:
    for s in _TABLES[client]:
        if s.key == key:
            value = s.default_value()
            if value is None:
                raise KeyError(f"{client} setting {key} has no default")
            return value
    raise KeyError(f"no {client} setting {key}")


def default_int(client: str, key: str) -> int:
    """`key`'s default for `client` (producer, consumer, admin), an int."""
    value = _default(client, key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{client} setting {key} is not an int")
    return value


def default_float(client: str, key: str) -> float:
    """`key`'s default for `client`, a number; a whole one stays an int (5, not 5.0)."""
    value = _default(client, key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{client} setting {key} is not a number")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def default_str(client: str, key: str) -> str:
    value = _default(client, key)
    if not isinstance(value, str):
        raise TypeError(f"{client} setting {key} is not a string")
    return value


def default_bool(client: str, key: str) -> bool:
    value = _default(client, key)
    if not isinstance(value, bool):
        raise TypeError(f"{client} setting {key} is not a boolean")
    return value


# The defaults the layers under the three clients use (connections, the metadata view, the
# coordinator lookup, the group member's core, the Spark source and the CLI).
REQUEST_TIMEOUT_MS: Final = default_int("consumer", "request.timeout.ms")
RETRY_BACKOFF_MS: Final = default_int("consumer", "retry.backoff.ms")
RETRY_BACKOFF_MAX_MS: Final = default_int("consumer", "retry.backoff.max.ms")
METADATA_MAX_AGE_MS: Final = default_int("consumer", "metadata.max.age.ms")
MAX_POLL_INTERVAL_MS: Final = default_int("consumer", "max.poll.interval.ms")
MAX_POLL_RECORDS: Final = default_int("consumer", "max.poll.records")
FETCH_MAX_WAIT_MS: Final = default_int("consumer", "fetch.max.wait.ms")
DELIVERY_TIMEOUT_MS: Final = default_float("producer", "delivery.timeout.ms")
MAX_REQUEST_SIZE: Final = default_int("producer", "max.request.size")
