"""AlterUserScramCredentials (key 51): add or replace (upsert) and delete users' SCRAM
credentials. The client sends the salted password (RFC 5802's Hi(password, salt, i)), never
the password; the broker derives and stores the stored and server keys (KIP-554)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
    "AlterUserScramCredentialsResult",
    "ScramCredentialDeletion",
    "ScramCredentialUpsertion",
]


@dataclass(frozen=True, slots=True)
class ScramCredentialDeletion:
    name: str
    mechanism: Int8


@dataclass(frozen=True, slots=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: Int8
    iterations: Int32
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...] = ()
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterUserScramCredentialsResult:
    user: str
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterUserScramCredentialsResponse:
    results: tuple[AlterUserScramCredentialsResult, ...]
    throttle_time_ms: Int32 = 0
