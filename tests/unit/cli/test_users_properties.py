"""`highwater users add NAME --write-client-properties FILE`: NAME's client properties, 0600,
with the --command-config's connection settings; the password is never printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from client.cli.properties import read_properties_file
from tests.unit.cli.fakes import run


class _AcceptingAdmin:
    def __init__(self, bootstrap: str, **options: Any) -> None:
        pass

    async def __aenter__(self) -> _AcceptingAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def alice(tmp_path: Path) -> str:
    config = tmp_path / "alice.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.username=alice\nsasl.password=alice-secret\n"
    )
    return str(config)


@pytest.fixture
def upserts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    done: list[tuple[Any, ...]] = []

    async def upsert(admin: Any, *args: Any) -> None:
        done.append(args)

    monkeypatch.setattr("client.cli.users.Admin", _AcceptingAdmin)
    monkeypatch.setattr("client.cli.users.upsert_user", upsert)
    return done


def test_users_add_writes_the_users_client_properties_owner_only(
    upserts: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read here")
    admin = tmp_path / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
        f"sasl.password=admin-secret\nssl.truststore.location={ca}\n"
    )
    written = tmp_path / "carol.properties"
    password = " p=a:s#s\\wörd!"  # every character java.util.Properties escapes
    result = run(
        ["users", "add", "carol", "--command-config", str(admin),
         "--write-client-properties", str(written)],
        env={"HIGHWATER_USER_PASSWORD": password},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert upserts and upserts[0][:2] == ("carol", password)
    assert written.stat().st_mode & 0o777 == 0o600
    assert read_properties_file(written) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": password,
        "ssl.truststore.location": str(ca),
    }
    assert result.stdout == f"Client properties of user carol written to {written} (mode 0600).\n"
    assert password not in result.output and "admin-secret" not in result.output


def test_users_add_writes_a_mechanism_the_user_has(
    upserts: list[tuple[Any, ...]], tmp_path: Path, alice: str
) -> None:
    written = tmp_path / "dave.properties"
    result = run(
        ["users", "add", "dave", "--password", "d", "--mechanism", "SCRAM-SHA-512",
         "--command-config", alice, "--write-client-properties", str(written)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_properties_file(written)["sasl.mechanism"] == "SCRAM-SHA-512"  # alice: -256


def test_users_add_without_a_sasl_command_config_writes_nothing(
    upserts: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    written = tmp_path / "erin.properties"
    result = run(
        ["users", "add", "erin", "--password", "e", "--write-client-properties", str(written)]
    )
    assert result.exit_code == 2
    assert "a SASL --command-config" in result.stderr
    assert not written.exists() and upserts == []
