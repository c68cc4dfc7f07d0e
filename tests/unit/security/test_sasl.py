"""The SASL authenticator core and SCRAM credentials, against scramp's client."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from scramp import ScramClient

from broker.core.principal import Principal
from broker.core.sasl import PasswordCheck, SaslAuthenticator, SaslStage, SaslStep
from broker.core.scram import (
    ScramCredential,
    credential_from_salted,
    make_credential,
    password_matches,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.jaas import parse_jaas_login
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
CREDENTIALS = {
    ("alice", m): make_credential(m, "alice-secret") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
}


def authenticator(mechanisms: tuple[str, ...] = MECHANISMS) -> SaslAuthenticator:
    return SaslAuthenticator(
        mechanisms, lambda user, m: CREDENTIALS.get((user, m)), fake_salt_key=b"k" * 32
    )


def answered(sasl: SaslAuthenticator, auth_bytes: bytes) -> SaslStep:
    """A SaslAuthenticate step; a password check it asks for is run first (as the server does,
    in a thread)."""
    step = sasl.authenticate(SaslAuthenticateRequest(auth_bytes))
    if isinstance(step, PasswordCheck):
        return sasl.password_checked(step.run())
    return step


def scram(user: str, password: str, mechanism: str) -> tuple[SaslAuthenticator, object]:
    sasl = authenticator()
    assert sasl.handshake(SaslHandshakeRequest(mechanism)).response.error_code == 0
    client = ScramClient([mechanism], user, password)
    first = answered(sasl, client.get_client_first().encode())
    assert first.response.error_code == 0 and not first.close
    client.set_server_first(first.response.auth_bytes.decode())
    final = answered(sasl, client.get_client_final().encode())
    if final.principal is not None:
        client.set_server_final(final.response.auth_bytes.decode())  # the broker proved itself
    return sasl, final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logs_in_with_the_right_password(mechanism: str) -> None:
    sasl, final = scram("alice", "alice-secret", mechanism)
    assert final.principal == Principal("User", "alice")  # type: ignore[attr-defined]
    assert sasl.stage is SaslStage.COMPLETE
    assert sasl.admits(ApiKey.PRODUCE)


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "alice-secret")])
def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_last_step(
    user: str, password: str
) -> None:
    sasl, final = scram(user, password, "SCRAM-SHA-512")
    assert final.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert final.close and final.principal is None  # type: ignore[attr-defined]
    assert sasl.stage is SaslStage.FAILED and not sasl.admits(ApiKey.METADATA)


def rdkafka_scram(mechanism: str, password: str, repeat_client_nonce: bool,
                  tamper: str = "") -> tuple[SaslStep, str]:  # fmt: skip
    """A SCRAM login as librdkafka's rdkafka_sasl_scram.c writes it: before 2.6.1 its
    client-final nonce is its client nonce again, then the server-first nonce. `tamper` is
    appended to the nonce sent. The final step, and the server signature the client expects."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    sasl = authenticator()
    sasl.handshake(SaslHandshakeRequest(mechanism))
    client_nonce = "rdkafkaClientNonce0123456789abcd"
    client_first_bare = f"n=alice,r={client_nonce}"
    first = answered(sasl, f"n,,{client_first_bare}".encode())
    server_first = first.response.auth_bytes.decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    sent_nonce = (client_nonce if repeat_client_nonce else "") + fields["r"] + tamper
    without_proof = f"c=biws,r={sent_nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    signature = hmac.new(hashlib.new(name, client_key).digest(), auth_message, name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    server_key = hmac.new(salted, b"Server Key", name).digest()
    server_signature = base64.b64encode(hmac.new(server_key, auth_message, name).digest())
    final = answered(sasl, f"{without_proof},p={proof.decode()}".encode())
    return final, f"v={server_signature.decode()}"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("repeat_client_nonce", [False, True])
def test_scram_takes_a_client_final_nonce_that_ends_with_the_server_first_one(
    mechanism: str, repeat_client_nonce: bool
) -> None:
    """As Kafka 3.9's ScramSaslServer (endsWith): librdkafka before 2.6.1 (Debian's kcat 1.7.1)
    repeats its client nonce in front; the proof over the message as sent still decides."""
    final, server_final = rdkafka_scram(mechanism, "alice-secret", repeat_client_nonce)
    assert final.response.error_code == ErrorCode.NONE and not final.close
    assert final.principal == Principal("User", "alice")
    assert final.response.auth_bytes.decode() == server_final  # type: ignore[union-attr]
    wrong, _ = rdkafka_scram(mechanism, "wrong", repeat_client_nonce)
    assert wrong.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and wrong.close


def test_scram_refuses_a_client_final_nonce_that_does_not_end_with_the_server_first_one() -> None:
    for repeat_client_nonce in (False, True):
        final, _ = rdkafka_scram("SCRAM-SHA-256", "alice-secret", repeat_client_nonce, "x")
        assert final.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert final.close and final.principal is None


def test_an_unknown_users_salt_is_stable() -> None:
    salts = set()
    for _ in range(2):
        sasl = authenticator()
        sasl.handshake(SaslHandshakeRequest("SCRAM-SHA-256"))
        client = ScramClient(["SCRAM-SHA-256"], "nobody", "x")
        first = answered(sasl, client.get_client_first().encode())
        salts.add(first.response.auth_bytes.decode().split(",")[1])
    assert len(salts) == 1


def test_plain() -> None:
    good = authenticator()
    good.handshake(SaslHandshakeRequest("PLAIN"))
    assert answered(good, b"\0alice\0alice-secret").principal == Principal("User", "alice")
    for message in (b"\0alice\0wrong", b"\0nobody\0x", b"bob\0alice\0alice-secret", b"garbage"):
        sasl = authenticator()
        sasl.handshake(SaslHandshakeRequest("PLAIN"))
        step = answered(sasl, message)
        assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and step.close


@pytest.mark.parametrize("message", [b"\0alice\0alice-secret", b"\0alice\0wrong", b"\0nobody\0x"])
def test_plain_hands_the_hashing_to_the_caller_for_known_and_unknown_users(message: bytes) -> None:
    """The PBKDF2 check is not run by `authenticate` (the server runs it off the event loop),
    and an unknown user is given one to run too, as costly as a real one's."""
    sasl = authenticator()
    sasl.handshake(SaslHandshakeRequest("PLAIN"))
    check = sasl.authenticate(SaslAuthenticateRequest(message))
    assert isinstance(check, PasswordCheck)
    assert check.mechanism == "SCRAM-SHA-512" and check.credential.iterations >= 4096
    assert sasl.stage is SaslStage.AUTHENTICATE and not sasl.admits(ApiKey.PRODUCE)
    again = sasl.authenticate(SaslAuthenticateRequest(message))  # nothing while it runs
    assert isinstance(again, SaslStep) and again.close
    assert again.response.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_a_password_check_result_decides_the_plain_step() -> None:
    sasl = authenticator()
    sasl.handshake(SaslHandshakeRequest("PLAIN"))
    assert isinstance(sasl.authenticate(SaslAuthenticateRequest(b"\0nobody\0x")), PasswordCheck)
    refused = sasl.password_checked(False)
    assert refused.close and refused.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert sasl.password_checked(True).close  # no check pending: refused
    unasked = authenticator()
    unasked.handshake(SaslHandshakeRequest("PLAIN"))
    assert unasked.password_checked(True).response.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_only_the_handshake_requests_in_order() -> None:
    sasl = authenticator(("SCRAM-SHA-256",))
    assert sasl.admits(ApiKey.API_VERSIONS) and sasl.admits(ApiKey.SASL_HANDSHAKE)
    assert not sasl.admits(ApiKey.METADATA) and not sasl.admits(ApiKey.SASL_AUTHENTICATE)
    refused = sasl.handshake(SaslHandshakeRequest("PLAIN"))
    assert refused.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert refused.response.mechanisms == ("SCRAM-SHA-256",) and refused.close  # type: ignore[union-attr]
    early = answered(authenticator(), b"x")
    assert early.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and early.close


def test_credentials_round_trip_and_match_their_password() -> None:
    credential = make_credential("SCRAM-SHA-512", "pw", 4096)
    assert ScramCredential.decode(credential.encode()) == credential
    assert password_matches("SCRAM-SHA-512", credential, "pw")
    assert not password_matches("SCRAM-SHA-512", credential, "px")
    with pytest.raises(ValueError):
        ScramCredential.decode("salt=AA==,stored_key=AA==,server_key=AA==,iterations=100")
    with pytest.raises(ValueError):
        ScramCredential.decode("nonsense")


def test_a_salted_password_gives_the_same_credential_as_the_password() -> None:
    import hashlib

    made = make_credential("SCRAM-SHA-256", "pw", 4096, salt=b"0123456789abcdef")
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", b"0123456789abcdef", 4096)
    assert credential_from_salted("SCRAM-SHA-256", made.salt, salted, 4096) == made
    with pytest.raises(ValueError):
        credential_from_salted("SCRAM-SHA-256", made.salt, salted[:5], 4096)


def test_jaas_lines() -> None:
    login = parse_jaas_login(
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="a \\"quoted\\"; secret";'
    )
    assert (login.username, login.password) == ("alice", 'a "quoted"; secret')
    for bad in ("", "Module required;", 'Module required username="a";', "just words"):
        with pytest.raises(ValueError):
            parse_jaas_login(bad)
