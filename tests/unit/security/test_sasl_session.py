"""An authenticated SASL session's lifetime and re-authentication (KIP-368), the authenticator
run again on the same connection, and which users a credential change revokes."""

from __future__ import annotations

import pytest
from scramp import ScramClient

from broker.core.principal import Principal
from broker.core.sasl import SaslAuthenticator, SaslStep
from broker.core.sasl_session import Admission, Completion, SaslSession, revoked_users
from broker.core.scram import make_credential
from client.security import reauthentication_delay_s
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest

ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")
CREDENTIALS = {
    (user, m): make_credential(m, f"{user}-secret")
    for user in ("alice", "bob")
    for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
}


def test_without_a_lifetime_a_session_never_ends() -> None:
    session = SaslSession(0)
    assert session.authenticated(ALICE, "SCRAM-SHA-512", 1000) == Completion(0)
    assert session.admit(ApiKey.PRODUCE, 10**12) is Admission.SERVE


def test_a_session_lasts_max_reauth_ms_and_then_closes_the_connection() -> None:
    session = SaslSession(3000)
    assert session.authenticated(ALICE, "SCRAM-SHA-512", 1000) == Completion(3000)
    assert session.admit(ApiKey.PRODUCE, 4000) is Admission.SERVE  # at the end, still in
    assert session.admit(ApiKey.PRODUCE, 4001) is Admission.EXPIRED
    assert session.admit(ApiKey.METADATA, 4001) is Admission.EXPIRED


def test_a_listener_override_for_the_mechanism_used_wins() -> None:
    session = SaslSession(3000, {"PLAIN": 1000, "SCRAM-SHA-256": 0})
    assert session.authenticated(ALICE, "PLAIN", 0) == Completion(1000)
    assert session.admit(ApiKey.PRODUCE, 1001) is Admission.EXPIRED
    other = SaslSession(3000, {"PLAIN": 1000, "SCRAM-SHA-256": 0})
    assert other.authenticated(ALICE, "SCRAM-SHA-256", 0) == Completion(0)  # never ends
    assert other.admit(ApiKey.PRODUCE, 10**12) is Admission.SERVE
    third = SaslSession(3000, {"PLAIN": 1000})
    assert third.authenticated(ALICE, "SCRAM-SHA-512", 0) == Completion(3000)


def test_sasl_handshake_reauthenticates_even_after_the_end() -> None:
    session = SaslSession(3000)
    session.authenticated(ALICE, "SCRAM-SHA-512", 1000)
    assert session.admit(ApiKey.SASL_HANDSHAKE, 2000) is Admission.REAUTHENTICATE
    assert session.admit(ApiKey.SASL_HANDSHAKE, 9000) is Admission.REAUTHENTICATE


def test_reauthenticating_as_the_same_principal_starts_a_new_session() -> None:
    session = SaslSession(3000)
    session.authenticated(ALICE, "SCRAM-SHA-512", 1000)
    assert session.authenticated(ALICE, "SCRAM-SHA-512", 3500) == Completion(3000)
    assert session.reauthentications == 1
    assert session.admit(ApiKey.PRODUCE, 6500) is Admission.SERVE
    assert session.admit(ApiKey.PRODUCE, 6501) is Admission.EXPIRED


def test_reauthenticating_as_another_principal_is_refused() -> None:
    session = SaslSession(3000)
    session.authenticated(ALICE, "SCRAM-SHA-512", 1000)
    completion = session.authenticated(BOB, "SCRAM-SHA-512", 2000)
    assert completion.refusal is not None
    assert "Cannot change principals during re-authentication" in completion.refusal
    assert session.principal == ALICE and session.expires_at_ms == 4000  # unchanged
    assert session.user() == "alice"


def test_a_session_names_its_user_once_authenticated() -> None:
    session = SaslSession(0)
    assert session.user() is None
    session.authenticated(ALICE, "SCRAM-SHA-512", 0)
    assert session.user() == "alice"


def _login(sasl: SaslAuthenticator, mechanism: str, user: str) -> Principal | None:
    handshake = sasl.handshake(SaslHandshakeRequest(mechanism))
    assert handshake.response.error_code == ErrorCode.NONE
    client = ScramClient([mechanism], user, f"{user}-secret")
    first = sasl.authenticate(SaslAuthenticateRequest(client.get_client_first().encode()))
    assert isinstance(first, SaslStep) and not first.close
    client.set_server_first(first.response.auth_bytes.decode())  # type: ignore[union-attr]
    final = sasl.authenticate(SaslAuthenticateRequest(client.get_client_final().encode()))
    assert isinstance(final, SaslStep)
    return final.principal


def _authenticator() -> SaslAuthenticator:
    return SaslAuthenticator(
        ("SCRAM-SHA-256", "SCRAM-SHA-512"),
        lambda user, m: CREDENTIALS.get((user, m)),
        fake_salt_key=b"k" * 32,
    )


def test_the_authenticator_runs_the_exchange_again_on_the_same_connection() -> None:
    sasl = _authenticator()
    assert _login(sasl, "SCRAM-SHA-512", "alice") == ALICE
    sasl.begin_reauthentication()
    assert not sasl.admits(ApiKey.PRODUCE)  # nothing but the exchange until it is done
    assert _login(sasl, "SCRAM-SHA-512", "alice") == ALICE
    assert sasl.admits(ApiKey.PRODUCE)
    sasl.begin_reauthentication()
    assert _login(sasl, "SCRAM-SHA-512", "bob") == BOB  # the session core refuses this one


def test_reauthentication_must_use_the_first_mechanism() -> None:
    sasl = _authenticator()
    assert _login(sasl, "SCRAM-SHA-512", "alice") == ALICE
    sasl.begin_reauthentication()
    step = sasl.handshake(SaslHandshakeRequest("SCRAM-SHA-256"))
    assert step.close and step.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert step.response.mechanisms == ("SCRAM-SHA-512",)  # type: ignore[union-attr]


def test_deleted_and_changed_credentials_revoke_their_users() -> None:
    before = dict(CREDENTIALS)
    after = {k: v for k, v in before.items() if k[0] != "alice"}  # alice deleted
    assert revoked_users(before, after) == {"alice"}
    changed = dict(before)
    changed[("bob", "SCRAM-SHA-256")] = make_credential("SCRAM-SHA-256", "new-password")
    assert revoked_users(before, changed) == {"bob"}
    assert revoked_users(before, dict(before)) == frozenset()


def test_a_credential_added_for_another_mechanism_revokes_nothing() -> None:
    before = {("carol", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "c")}
    after = {**before, ("carol", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "c")}
    assert revoked_users(before, after) == frozenset()
    assert revoked_users({}, after) == frozenset()  # a new user


@pytest.mark.parametrize("lifetime_ms", [1000, 3000, 3_600_000])
def test_clients_reauthenticate_at_85_to_95_percent_of_the_lifetime(lifetime_ms: int) -> None:
    for _ in range(200):
        delay_s = reauthentication_delay_s(lifetime_ms)
        assert 0.85 * lifetime_ms / 1000 <= delay_s <= 0.95 * lifetime_ms / 1000


def test_clients_never_reauthenticate_without_a_lifetime() -> None:
    assert reauthentication_delay_s(0) == float("inf")
