"""HTTP basic authentication (RFC 7617) of the metrics listener against the SCRAM users. Pure.

A request's `Authorization: Basic base64(user:password)` is checked as a SASL PLAIN login is
(broker/core/sasl.py): against the user's stored SCRAM credential, the stronger hash first, the
stored key compared in constant time. An unknown user is hashed against a made-up credential
with a stable per-user salt, so a wrong user and a wrong password cost and answer alike. The
hashing (PBKDF2, 5-25 ms) is for the caller to run off its event loop.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Final

from broker.core.sasl import CredentialLookup
from broker.core.scram import MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential, password_matches

__all__ = ["REALM", "basic_credentials", "login_matches"]

REALM: Final = "highwater"


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header value; None if absent or
    malformed (RFC 7617: the user is everything before the first colon, UTF-8)."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None
    return user, password


def login_matches(
    user: str, password: str, credentials: CredentialLookup, fake_salt_key: bytes
) -> bool:
    """Whether `password` is `user`'s (SASL PLAIN's check). Runs PBKDF2 once, known user or
    not."""
    for mechanism in reversed(SCRAM_MECHANISMS):  # the stronger hash first
        credential = credentials(user, mechanism)
        if credential is not None:
            return password_matches(mechanism, credential, password)
    salt = hmac.new(fake_salt_key, user.encode(), hashlib.sha256).digest()[:16]
    fake = ScramCredential(salt, secrets.token_bytes(64), secrets.token_bytes(64), MIN_ITERATIONS)
    password_matches(SCRAM_MECHANISMS[-1], fake, password)
    return False
