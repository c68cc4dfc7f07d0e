"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms each user has credentials for,
with their iteration counts (never the credentials themselves)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "CredentialInfo",
    "DescribeUserScramCredentialsRequest",
    "DescribeUserScramCredentialsResponse",
    "DescribeUserScramCredentialsResult",
]


@dataclass(frozen=True, slots=True)
class DescribeUserScramCredentialsRequest:
    users: tuple[str, ...] | None = None  # None: every user


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    mechanism: Int8  # Kafka's ScramMechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: Int32


@dataclass(frozen=True, slots=True)
class DescribeUserScramCredentialsResult:
    user: str
    error_code: Int16
    error_message: str | None = None
    credential_infos: tuple[CredentialInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeUserScramCredentialsResponse:
    error_code: Int16
    error_message: str | None = None
    results: tuple[DescribeUserScramCredentialsResult, ...] = ()
    throttle_time_ms: Int32 = 0
