"""The consumer's settings as one frozen object (Kafka's ConsumerConfig), defaults from the
clients' settings table (client/settings.py); `__post_init__` checks what Consumer's keyword
arguments give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from client.settings import default_bool, default_int, default_str

__all__ = ["CONSUMER_DEFAULTS", "OFFSET_RESETS", "ConsumerConfig"]

_C: Final = "consumer"
OFFSET_RESETS: Final = ("earliest", "latest", "none")  # auto.offset.reset's values


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Each field is the Kafka setting of the same name with "_" for "."; group_id None: no
    group (assign() only)."""

    client_id: str = default_str(_C, "client.id")
    auto_offset_reset: str = default_str(_C, "auto.offset.reset")
    fetch_min_bytes: int = default_int(_C, "fetch.min.bytes")
    fetch_max_wait_ms: int = default_int(_C, "fetch.max.wait.ms")
    fetch_max_bytes: int = default_int(_C, "fetch.max.bytes")
    max_partition_fetch_bytes: int = default_int(_C, "max.partition.fetch.bytes")
    max_poll_records: int = default_int(_C, "max.poll.records")
    request_timeout_ms: int = default_int(_C, "request.timeout.ms")
    retry_backoff_ms: int = default_int(_C, "retry.backoff.ms")
    retry_backoff_max_ms: int = default_int(_C, "retry.backoff.max.ms")
    default_api_timeout_ms: int = default_int(_C, "default.api.timeout.ms")
    metadata_max_age_ms: int = default_int(_C, "metadata.max.age.ms")
    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool = default_bool(_C, "enable.auto.commit")
    auto_commit_interval_ms: int = default_int(_C, "auto.commit.interval.ms")
    max_poll_interval_ms: int = default_int(_C, "max.poll.interval.ms")
    group_remote_assignor: str | None = None

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be one of {sorted(OFFSET_RESETS)}")
        if self.group_id is not None and not self.group_id:
            raise ValueError("group_id must not be empty")
        if self.group_instance_id is not None and self.group_id is None:
            raise ValueError("group_instance_id needs a group_id")


CONSUMER_DEFAULTS: Final = ConsumerConfig()
