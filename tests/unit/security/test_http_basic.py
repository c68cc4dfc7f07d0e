"""broker.core.http_basic: the metrics listener's basic authentication, checked as SASL PLAIN
is, against stored SCRAM credentials."""

from __future__ import annotations

import base64

import pytest

from broker.core.http_basic import basic_credentials, login_matches
from broker.core.scram import ScramCredential, make_credential

KEY = b"k" * 32


def header(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_a_basic_header_gives_user_and_password() -> None:
    assert basic_credentials(header("alice:pa:ss")) == ("alice", "pa:ss")
    assert basic_credentials("basic " + header("bob:").split(" ")[1]) == ("bob", "")
    assert basic_credentials(header("Zoë:mot")) == ("Zoë", "mot")


@pytest.mark.parametrize(
    "value",
    [None, "", "Basic", "Bearer abc", "Basic !!!", header("no-colon"), header(":password")],
)
def test_a_missing_or_malformed_header_gives_nothing(value: str | None) -> None:
    assert basic_credentials(value) is None


def test_only_the_users_own_password_matches() -> None:
    stored = {
        ("alice", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "alice-secret"),
        ("bob", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "bob-secret"),
    }

    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return stored.get((user, mechanism))

    assert login_matches("alice", "alice-secret", lookup, KEY)
    assert login_matches("bob", "bob-secret", lookup, KEY)
    assert not login_matches("alice", "bob-secret", lookup, KEY)
    assert not login_matches("bob", "alice-secret", lookup, KEY)
    assert not login_matches("mallory", "alice-secret", lookup, KEY)
    assert not login_matches("mallory", "", lookup, KEY)
