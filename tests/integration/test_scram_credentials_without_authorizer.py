"""AlterUserScramCredentials on a broker without an authorizer, over its PLAINTEXT listener
(principal `User:ANONYMOUS`), with the test playing the controller of one in-process broker,
as in test_broker_handlers.py. Every other check passes without an authorizer; this one needs
a super user, or anyone could set anyone's password."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialUpsertion,
)
from tests.integration.test_broker_handlers import running_broker

pytestmark = pytest.mark.integration

SCRAM_SHA_512 = 2
UPSERT = AlterUserScramCredentialsRequest(
    upsertions=(ScramCredentialUpsertion("admin", SCRAM_SHA_512, 4096, b"salt", b"s" * 64),)
)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        (("super.users=User:alice",), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        # Allowed: it goes on to ZooKeeper, which this broker has none of.
        (("super.users=User:alice;User:ANONYMOUS",), ErrorCode.NOT_CONTROLLER),
    ],
)
async def test_only_a_super_user_alters_credentials_without_an_authorizer(
    tmp_path: Path, overrides: tuple[str, ...], expected: ErrorCode
) -> None:
    async with running_broker(tmp_path, overrides) as broker:
        assert not broker.ctx.authorizing
        answer: AlterUserScramCredentialsResponse = await broker.conn.request(UPSERT)
    assert [(r.user, r.error_code) for r in answer.results] == [("admin", expected)]
