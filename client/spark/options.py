"""The Spark source's and sink's options, parsed and checked (pure: no pyspark, no IO).

Names follow Spark's Kafka source (connector/kafka-0-10-sql). Spark hands options over
case-insensitively, so keys are compared lower-cased; an unknown or conflicting option is an
OptionError that names it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from client.security import SECURITY_PROPERTIES
from client.spark.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition
from protocol.compression import CODECS

__all__ = [
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "parse_offsets_json",
    "parse_sink_options",
    "parse_source_options",
]

DEFAULT_POLL_TIMEOUT_MS: Final = 120_000
_MAX_PARTITIONS_JSON_CHARS: Final = 1_000_000

# Options Spark itself may pass through to a source or sink: accepted and ignored.
_SPARK_OWN: Final = frozenset({"path", "checkpointlocation", "queryname"})


class OptionError(ValueError):
    """A bad, unknown or conflicting option; the message names it."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    # "earliest" | "latest" | explicit offsets (-2 earliest, -1 latest per partition)
    starting_offsets: str | PartitionOffsets = "latest"
    starting_timestamp_ms: int | None = None
    # startingOffsetsByTimestampStrategy: a partition with no record at or after the starting
    # timestamp fails the query ("error", Spark's default) or starts at its HW ("latest").
    timestamp_strategy: str = "error"
    ending_offsets: str | PartitionOffsets = "latest"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    # Kafka's client security properties, from the `kafka.`-prefixed options, prefix removed.
    security: tuple[tuple[str, str], ...] = ()
    # groupIdForLag: each completed micro-batch's end offsets are committed to this consumer
    # group, only so that `highwater groups describe` shows the query's lag (never read back).
    group_id_for_lag: str | None = None

    def matches(self, topic: str) -> bool:
        """Whether a topic belongs to the subscription (assign: its topics)."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return any(tp.topic == topic for tp in self.assign or ())


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    compression: str = "none"  # Kafka's compression.type name
    security: tuple[tuple[str, str], ...] = ()  # as SourceOptions.security


_SOURCE_KEYS: Final = frozenset(
    {
        "bootstrap.servers",
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribepattern",
        "assign",
        "startingoffsets",
        "startingtimestamp",
        "startingoffsetsbytimestampstrategy",
        "endingoffsets",
        "maxoffsetspertrigger",
        "minpartitions",
        "failondataloss",
        "includeheaders",
        "kafkaconsumer.polltimeoutms",
        "groupidforlag",
    }
) | frozenset(f"kafka.{p}" for p in SECURITY_PROPERTIES)
_SINK_KEYS: Final = frozenset(
    {"bootstrap.servers", "kafka.bootstrap.servers", "topic", "kafka.compression.type"}
) | frozenset(f"kafka.{p}" for p in SECURITY_PROPERTIES)
_SPELLED: Final = {
    name.lower(): name
    for name in (
        "bootstrap.servers",
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingOffsets",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "failOnDataLoss",
        "includeHeaders",
        "kafkaConsumer.pollTimeoutMs",
        "groupIdForLag",
        "topic",
        "kafka.compression.type",
        *(f"kafka.{p}" for p in SECURITY_PROPERTIES),
    )
}


def _security(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The `kafka.`-prefixed security options (as Spark's Kafka source passes them on to its
    consumers), the prefix removed."""
    return tuple((p, options[f"kafka.{p}"]) for p in SECURITY_PROPERTIES if f"kafka.{p}" in options)


def parse_source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check the options of `spark.read` (streaming=False) or `spark.readStream`."""
    options = _lowered(raw, _SOURCE_KEYS)
    bootstrap = _bootstrap(options)
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(chosen) != 1:
        raise OptionError(
            "give exactly one of the options 'subscribe', 'subscribePattern', 'assign'"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    subscribe = pattern = assign = None
    if "subscribe" in options:
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option 'subscribe': no topic named")
    elif "subscribepattern" in options:
        pattern = options["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern': bad regular expression: {exc}") from exc
        if not pattern:
            raise OptionError("option 'subscribePattern' is empty")
    else:
        assign = _parse_assign(options["assign"])

    if "startingoffsets" in options and "startingtimestamp" in options:
        raise OptionError("give 'startingOffsets' or 'startingTimestamp', not both")
    starting = _parse_bound(
        options.get("startingoffsets", "latest" if streaming else "earliest"),
        "startingOffsets",
        # A batch read from "latest" would read nothing: Spark refuses it, so do we.
        refuse=None if streaming else "latest",
    )
    starting_timestamp = None
    if "startingtimestamp" in options:
        starting_timestamp = _int(options["startingtimestamp"], "startingTimestamp", minimum=0)
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"not {options['startingoffsetsbytimestampstrategy']!r}"
        )
    if streaming and "endingoffsets" in options:
        raise OptionError("option 'endingOffsets' is for batch queries only (spark.read)")
    ending = _parse_bound(
        options.get("endingoffsets", "latest"), "endingOffsets", refuse="earliest"
    )
    if assign is not None:
        for name, bound in (("startingOffsets", starting), ("endingOffsets", ending)):
            if isinstance(bound, dict) and set(bound) != set(assign):
                raise OptionError(f"option {name!r} must name exactly the assigned partitions")
    max_offsets = None
    if "maxoffsetspertrigger" in options:
        if not streaming:
            raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries only")
        max_offsets = _int(options["maxoffsetspertrigger"], "maxOffsetsPerTrigger", minimum=1)
    group_id_for_lag = None
    if "groupidforlag" in options:
        if not streaming:
            raise OptionError("option 'groupIdForLag' is for streaming queries only")
        group_id_for_lag = options["groupidforlag"].strip()
        if not group_id_for_lag:
            raise OptionError("option 'groupIdForLag' is empty")
    min_partitions = None
    if "minpartitions" in options:
        min_partitions = _int(options["minpartitions"], "minPartitions", minimum=1)
    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting_offsets=starting,
        starting_timestamp_ms=starting_timestamp,
        timestamp_strategy=strategy,
        ending_offsets=ending,
        max_offsets_per_trigger=max_offsets,
        min_partitions=min_partitions,
        fail_on_data_loss=_bool(options.get("failondataloss", "true"), "failOnDataLoss"),
        include_headers=_bool(options.get("includeheaders", "false"), "includeHeaders"),
        poll_timeout_ms=_int(
            options.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS)),
            "kafkaConsumer.pollTimeoutMs",
            minimum=1,
        ),
        security=_security(options),
        group_id_for_lag=group_id_for_lag,
    )


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    options = _lowered(raw, _SINK_KEYS)
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    compression = options.get("kafka.compression.type", "none").strip().lower()
    if compression not in CODECS:
        raise OptionError(
            f"option 'kafka.compression.type': {compression!r} is not one of {', '.join(CODECS)}"
        )
    return SinkOptions(
        _bootstrap(options), topic.strip() if topic else None, compression, _security(options)
    )


def parse_offsets_json(text: str, option: str) -> PartitionOffsets:
    """Spark's Kafka offsets JSON, `{"topic": {"0": 23, "1": -2}}`: -2 earliest, -1 latest."""
    if len(text) > _MAX_PARTITIONS_JSON_CHARS:
        raise OptionError(f"option {option!r}: JSON longer than {_MAX_PARTITIONS_JSON_CHARS}")
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"option {option!r}: not JSON: {exc}") from exc
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'option {option!r}: expected {{"topic": {{"partition": offset}}}}')
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict) or not partitions:
            raise OptionError(f"option {option!r}: topic {topic!r} needs a partition map")
        for partition, offset in partitions.items():
            tp = TopicPartition(topic, _int(str(partition), option, minimum=0))
            if type(offset) is not int or offset < LATEST - 1:
                raise OptionError(
                    f"option {option!r}: {tp}: offset must be an integer >= 0, or -2 (earliest) "
                    f"or -1 (latest), not {offset!r}"
                )
            offsets[tp] = offset
    return offsets


# ----- helpers ---------------------------------------------------------------------------------


def _lowered(raw: Mapping[str, str], known: frozenset[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in raw.items():
        lowered = key.lower()
        if lowered in _SPARK_OWN:
            continue
        if lowered not in known:
            # Spark lower-cases option names before a source sees them: list the known ones.
            raise OptionError(
                f"unknown option {key!r} (names are case-insensitive; known: "
                f"{', '.join(_SPELLED[k] for k in sorted(known))})"
            )
        options[lowered] = str(value)
    return options


def _bootstrap(options: Mapping[str, str]) -> str:
    given = {
        k: options[k].strip()
        for k in ("bootstrap.servers", "kafka.bootstrap.servers")
        if k in options
    }
    if not given:
        raise OptionError("option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required")
    if len(set(given.values())) > 1:
        raise OptionError("options 'bootstrap.servers' and 'kafka.bootstrap.servers' disagree")
    value = next(iter(given.values()))
    if not value:
        raise OptionError("option 'bootstrap.servers' is empty")
    return value


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """`{"topicA": [0, 1], "topicB": [2]}`."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"option 'assign': not JSON: {exc}") from exc
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError("option 'assign': expected {\"topic\": [partition, ...]}")
    found: list[TopicPartition] = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not partitions:
            raise OptionError(f"option 'assign': topic {topic!r} needs a list of partitions")
        for p in partitions:
            if type(p) is not int or p < 0:
                raise OptionError(f"option 'assign': {topic!r}: bad partition {p!r}")
            found.append(TopicPartition(topic, p))
    return tuple(sorted(set(found)))


def _parse_bound(text: str, option: str, *, refuse: str | None) -> str | PartitionOffsets:
    """ "earliest", "latest" or offsets JSON; `refuse` names the word (and its number, -2 or
    -1) the option may not take."""
    word = text.strip().lower()
    refused = {"earliest": EARLIEST, "latest": LATEST}.get(refuse or "")
    if word in ("earliest", "latest"):
        if word == refuse:
            raise OptionError(f"option {option!r} cannot be {word!r} here")
        return word
    offsets = parse_offsets_json(text, option)
    if refused is not None and refused in offsets.values():
        raise OptionError(f"option {option!r}: {refused} ({refuse}) is not allowed here")
    return offsets


def _int(text: str, option: str, *, minimum: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"option {option!r} must be an integer, not {text!r}") from None
    if value < minimum:
        raise OptionError(f"option {option!r} must be >= {minimum}, not {value}")
    return value


def _bool(text: str, option: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise OptionError(f"option {option!r} must be true or false, not {text!r}")
    return word == "true"
