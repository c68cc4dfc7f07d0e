"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): users' SCRAM
credentials in `/config/users/<name>`, each user rewritten by compare-and-set with a change
notification, so every broker's credential cache follows within seconds. DESCRIBE or ALTER on
the cluster, as Kafka; without an authorizer, altering needs a super user."""

from __future__ import annotations

from collections.abc import Callable

from broker.context import SESSION, BrokerContext
from broker.core.scram import (
    MECHANISM_CODES,
    SCRAM_MECHANISMS,
    ScramCredential,
    credential_from_salted,
)
from controller import zk_data
from controller.zk_configs import (
    USERS,
    ConfigChangedError,
    get_entity_config,
    list_users,
    set_entity_config,
)
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

__all__ = ["handle_alter_user_scram_credentials", "handle_describe_user_scram_credentials"]

_MECHANISMS = {code: name for name, code in MECHANISM_CODES.items()}
_ATTEMPTS = 5
_MAX_NAME_CHARS = 256


async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, header: RequestHeader, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        denied = ctx.denied(AclOperation.DESCRIBE, ResourceType.CLUSTER)
        return DescribeUserScramCredentialsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    if ctx.zk.absent:
        return DescribeUserScramCredentialsResponse(ErrorCode.NOT_CONTROLLER, "no ZooKeeper")
    names = request.users if request.users is not None else await ctx.zk.run(list_users())
    results = []
    for name in dict.fromkeys(names):
        stored = (
            {} if _bad_name(name) else (await ctx.zk.run(get_entity_config(USERS, name))).config
        )
        infos = []
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in stored:
                try:
                    iterations = ScramCredential.decode(stored[mechanism]).iterations
                except ValueError:
                    continue
                infos.append(CredentialInfo(MECHANISM_CODES[mechanism], iterations))
        if infos:
            results.append(
                DescribeUserScramCredentialsResult(name, ErrorCode.NONE, None, tuple(infos))
            )
        elif request.users is not None:
            results.append(
                DescribeUserScramCredentialsResult(
                    name, ErrorCode.RESOURCE_NOT_FOUND, f"user {name!r} has no credentials"
                )
            )
    return DescribeUserScramCredentialsResponse(ErrorCode.NONE, None, tuple(results))


async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, header: RequestHeader, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = list(
        dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    )
    if not _may_alter_credentials(ctx):
        denied = ctx.denied(AclOperation.ALTER, ResourceType.CLUSTER)
        if not ctx.authorizing:  # no ACL would help: say what does
            denied += ": without an authorizer, only super.users may change credentials"
        return _all(users, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    if ctx.zk.absent:
        return _all(users, ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session")
    results = []
    for user in users:
        code, message, changes = _changes_of(user, request)
        if code == ErrorCode.NONE:
            code, message = await _apply(ctx, user, changes)
        results.append(AlterUserScramCredentialsResult(user, code, message))
    return AlterUserScramCredentialsResponse(tuple(results))


def _may_alter_credentials(ctx: BrokerContext) -> bool:
    """ALTER on the cluster. Without an authorizer every check passes, and anyone who reaches
    any listener could set anyone's password, then log in as them on the SASL listeners:
    there, only `super.users` may (Kafka lets everyone; this is stricter on purpose)."""
    if ctx.authorizing:
        return ctx.authorize_cluster(AclOperation.ALTER)
    return SESSION.get().principal in ctx.config.super_users


Change = Callable[[dict[str, str]], str | None]  # edits the stored map; an error message


def _changes_of(
    user: str, request: AlterUserScramCredentialsRequest
) -> tuple[ErrorCode, str | None, list[Change]]:
    """This user's deletions and upsertions, checked as Kafka checks them."""
    if _bad_name(user):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "a user name is 1 to 256 characters, no /", []
    changes: list[Change] = []
    seen: set[str] = set()
    for deletion in (d for d in request.deletions if d.name == user):
        mechanism = _MECHANISMS.get(deletion.mechanism)
        if mechanism is None:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"mechanism {deletion.mechanism}", []
        if mechanism in seen:
            return ErrorCode.DUPLICATE_RESOURCE, f"{mechanism} named twice for {user}", []
        seen.add(mechanism)
        changes.append(_deletion(user, mechanism))
    for upsertion in (u for u in request.upsertions if u.name == user):
        mechanism = _MECHANISMS.get(upsertion.mechanism)
        if mechanism is None:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"mechanism {upsertion.mechanism}", []
        if mechanism in seen:
            return ErrorCode.DUPLICATE_RESOURCE, f"{mechanism} named twice for {user}", []
        seen.add(mechanism)
        try:
            credential = credential_from_salted(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
        except ValueError as exc:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc), []
        changes.append(_upsertion(mechanism, credential.encode()))
    return ErrorCode.NONE, None, changes


def _deletion(user: str, mechanism: str) -> Change:
    def delete(stored: dict[str, str]) -> str | None:
        if stored.pop(mechanism, None) is None:
            return f"user {user!r} has no {mechanism} credential"
        return None

    return delete


def _upsertion(mechanism: str, encoded: str) -> Change:
    def upsert(stored: dict[str, str]) -> str | None:
        stored[mechanism] = encoded
        return None

    return upsert


async def _apply(
    ctx: BrokerContext, user: str, changes: list[Change]
) -> tuple[ErrorCode, str | None]:
    for _ in range(_ATTEMPTS):
        try:
            stored = await ctx.zk.run(get_entity_config(USERS, user))
        except zk_data.ZkDataError as exc:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"stored credentials unreadable: {exc}"
        entries = dict(stored.config)
        for change in changes:
            problem = change(entries)
            if problem is not None:
                return ErrorCode.RESOURCE_NOT_FOUND, problem
        try:
            await ctx.zk.run(set_entity_config(USERS, user, entries, stored.version))
        except ConfigChangedError:
            continue
        return ErrorCode.NONE, None
    return ErrorCode.UNKNOWN_SERVER_ERROR, "the user's credentials kept changing; try again"


def _bad_name(name: str) -> bool:
    return not name or len(name) > _MAX_NAME_CHARS or "/" in name or name in (".", "..")


def _all(
    users: list[str], code: ErrorCode, message: str | None
) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(
        tuple(AlterUserScramCredentialsResult(u, code, message) for u in users)
    )
