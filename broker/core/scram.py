"""SCRAM credentials (RFC 5802/7677) as Kafka stores them in `/config/users/<name>`. Pure.

A credential is `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>` under the
mechanism's name (Kafka's ScramCredentialUtils): the password itself is never stored. The
salted hash comes from `scramp`; PLAIN logins are checked against the same credential,
comparing digests in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from typing import Final

from scramp import ScramException, ScramMechanism

__all__ = [
    "DEFAULT_ITERATIONS",
    "MECHANISM_CODES",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "ScramCredential",
    "credential_from_salted",
    "make_credential",
    "password_matches",
]

SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS: Final = 4096  # Kafka's (and RFC 7677's) minimum
DEFAULT_ITERATIONS: Final = 4096  # Kafka's kafka-configs default
MAX_ITERATIONS: Final = 16384  # Kafka's ScramMechanism.maxIterations
# Kafka's ScramMechanism codes (DescribeUserScramCredentials, AlterUserScramCredentials).
MECHANISM_CODES: Final = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        """ValueError on anything but Kafka's four fields."""
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep or key in fields:
                raise ValueError(f"malformed SCRAM credential field {item!r}")
            fields[key] = value
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"SCRAM credential fields {sorted(fields)}")
        try:
            credential = cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"malformed SCRAM credential: {exc}") from None
        if not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations {credential.iterations} outside 4096..16384")
        return credential


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new salted credential (a random salt unless given)."""
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"{mechanism} is not a SCRAM mechanism ({', '.join(SCRAM_MECHANISMS)})")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}")
    salt_out, stored_key, server_key, _ = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt
    )
    return ScramCredential(salt_out, stored_key, server_key, iterations)


def credential_from_salted(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential of a salted password (RFC 5802's SaltedPassword), as KIP-554's
    upsertion sends it: ClientKey = HMAC(salted, "Client Key"), StoredKey = H(ClientKey),
    ServerKey = HMAC(salted, "Server Key"). ValueError on a bad iteration count or length."""
    name = _HASHES[mechanism]
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}")
    if len(salted_password) != hashlib.new(name).digest_size or not salt:
        raise ValueError(
            f"a salted password of {mechanism} is {hashlib.new(name).digest_size} bytes"
        )
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (a PLAIN login, or a broker
    checking its own stored login); the stored key is compared in constant time."""
    try:
        _, stored_key, _, _ = ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=credential.iterations, salt=credential.salt
        )
    except ScramException:  # a password SASLprep refuses
        return False
    return hmac.compare_digest(stored_key, credential.stored_key)
