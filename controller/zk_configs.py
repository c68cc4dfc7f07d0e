"""Dynamic configs in ZooKeeper, as Kafka's AdminZkClient and ZkConfigManager keep them.

An entity's configs live in `/config/topics/<t>` or `/config/brokers/<default>` (the
cluster-wide broker defaults); a change rewrites the whole znode (compare-and-set on its
version) and, in the same transaction, creates a sequential `/config/changes/config_change_<n>`
naming the entity. Every broker watches `/config/changes`, reads the entities named after the
last notification it handled, and purges notifications older than 15 minutes (Kafka's
changeExpirationMs), a bounded number per round.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from controller import zk_data
from controller.zk_script import (
    ZkScript,
    children_or_empty,
    delete,
    ensure_path,
    exists,
    get_data,
    multi,
)
from controller.zk_types import (
    BadVersionError,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    TransactionOp,
)

__all__ = [
    "BROKERS",
    "CHANGE_EXPIRATION_MS",
    "CLIENTS",
    "CLIENTS_OF_USER",
    "MAX_PURGED_PER_ROUND",
    "TOPICS",
    "USERS",
    "ConfigChangedError",
    "ConfigChanges",
    "EntityConfig",
    "desanitize_entity_name",
    "entity_path",
    "get_entity_config",
    "list_users",
    "purge_expired_changes",
    "read_config_changes",
    "read_quota_entities",
    "sanitize_entity_name",
    "set_entity_config",
]

TOPICS: Final = "topics"
BROKERS: Final = "brokers"
USERS: Final = "users"  # SCRAM credentials: {"SCRAM-SHA-256": "salt=...,stored_key=...,..."}
CLIENTS: Final = "clients"  # client-id quotas; users' quotas share USERS' znodes (as Kafka)
CLIENTS_OF_USER: Final = "/clients/"  # a user's entity name with a client-id: <user>/clients/<c>
CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
MAX_PURGED_PER_ROUND: Final = 100


class ConfigChangedError(Exception):
    """The entity's configs changed since they were read: read and try again."""


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """An entity's stored configs and its znode's version (-1: no znode yet)."""

    config: Mapping[str, str] = field(default_factory=dict)
    version: int = -1


@dataclass(frozen=True, slots=True)
class ConfigChanges:
    """One round of `/config/changes`: the highest sequence number seen, the entities named by
    the notifications after the one last handled (in order, each once), every notification's
    name (for the purge), and the malformed ones (logged by the caller, then skipped)."""

    last: int
    entities: tuple[tuple[str, str], ...]
    children: tuple[str, ...]
    malformed: tuple[str, ...] = ()


def entity_path(entity_type: str, name: str) -> str:
    if entity_type == TOPICS:
        return zk_data.topic_config_path(name)
    if entity_type == BROKERS:
        return zk_data.broker_config_path(name)
    if entity_type == USERS:
        return f"{zk_data.CONFIG_USERS_PATH}/{name}"
    if entity_type == CLIENTS:
        return f"{zk_data.CONFIG_CLIENTS_PATH}/{name}"
    raise ValueError(f"unknown config entity type {entity_type!r}")


def get_entity_config(entity_type: str, name: str) -> ZkScript[EntityConfig]:
    """The entity's configs ({} and version -1 if it has no znode). ZkDataError if malformed."""
    found = yield from get_data(entity_path(entity_type, name))
    if found is None:
        return EntityConfig()
    data, stat = found
    if not data:
        # A parent made on the way to a nested entity (`/config/users/<u>` of
        # `/config/users/<u>/clients/<c>`), empty as Kafka makes it: no configs yet.
        return EntityConfig({}, stat.version)
    return EntityConfig(dict(zk_data.TopicConfigZnode.decode(data).config), stat.version)


def set_entity_config(
    entity_type: str, name: str, config: Mapping[str, str], version: int
) -> ZkScript[None]:
    """Write the entity's whole config if its znode is still at `version` (-1: it must not
    exist yet) and announce the change, in one transaction. Raises ConfigChangedError if
    another writer came first."""
    path = entity_path(entity_type, name)
    yield from ensure_path(path.rpartition("/")[0])
    yield from ensure_path(zk_data.CONFIG_CHANGES_PATH)
    data = zk_data.TopicConfigZnode(dict(config)).encode()
    notification = zk_data.ConfigChangeNotification(entity_type, name).encode()
    ops: list[TransactionOp] = [
        SetOp(path, data, version) if version >= 0 else CreateOp(path, data),
        CreateOp(
            f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
            notification,
            sequence=True,
        ),
    ]
    try:
        yield from multi(ops)
    except (BadVersionError, NodeExistsError, NoNodeError) as exc:
        if exc.op_index != 0:
            raise
        raise ConfigChangedError(f"{path} changed meanwhile") from exc


def list_users() -> ZkScript[list[str]]:
    """The users with stored credentials."""
    return sorted((yield from children_or_empty(zk_data.CONFIG_USERS_PATH)))


def sanitize_entity_name(name: str) -> str:
    """A user principal or client-id as a znode name (Kafka's Sanitizer: URL-encoded, so
    `/` and `*` cannot clash); `<default>` stays as it is, which no encoded name can be."""
    if name == zk_data.DEFAULT_BROKER_ENTITY:
        return name
    return urllib.parse.quote(name, safe="")


def desanitize_entity_name(stored: str) -> str:
    return stored if stored == zk_data.DEFAULT_BROKER_ENTITY else urllib.parse.unquote(stored)


def read_quota_entities() -> ZkScript[dict[tuple[str, str], dict[str, str]]]:
    """Every stored config of a client-quota entity, by (USERS or CLIENTS, entity name):
    `/config/users/<u>` (which may hold only SCRAM credentials), `/config/users/<u>/clients/<c>`
    (named `<u>/clients/<c>`) and `/config/clients/<c>`. Names are as stored (sanitized)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for user in sorted((yield from children_or_empty(zk_data.CONFIG_USERS_PATH))):
        yield from _read_entity(found, USERS, user)
        clients_path = f"{zk_data.CONFIG_USERS_PATH}/{user}/clients"
        for client in sorted((yield from children_or_empty(clients_path))):
            yield from _read_entity(found, USERS, f"{user}{CLIENTS_OF_USER}{client}")
    for client in sorted((yield from children_or_empty(zk_data.CONFIG_CLIENTS_PATH))):
        yield from _read_entity(found, CLIENTS, client)
    return found


def _read_entity(
    found: dict[tuple[str, str], dict[str, str]], entity_type: str, name: str
) -> ZkScript[None]:
    try:
        entity = yield from get_entity_config(entity_type, name)
    except zk_data.ZkDataError:
        return  # written by hand: skipped (a user's parent znode may hold no JSON)
    if entity.version >= 0:
        found[(entity_type, name)] = dict(entity.config)


def read_config_changes(after: int, *, entities: bool = True) -> ZkScript[ConfigChanges]:
    """The notifications with a sequence number above `after` (-1: all), re-arming the watch
    on `/config/changes`; without `entities`, only their numbers (the caller reads every
    entity anyway)."""
    children = yield from children_or_empty(zk_data.CONFIG_CHANGES_PATH, watch=True)
    numbered = sorted(
        (number, child) for child in children if (number := _sequence_of(child)) is not None
    )
    named: dict[tuple[str, str], None] = {}
    malformed: list[str] = []
    for number, child in numbered:
        if number <= after or not entities:
            continue
        found = yield from get_data(f"{zk_data.CONFIG_CHANGES_PATH}/{child}")
        if found is None:
            continue  # purged meanwhile (by another broker): its entity was read long ago
        try:
            notification = zk_data.ConfigChangeNotification.decode(found[0])
        except zk_data.ZkDataError:
            malformed.append(child)
            continue
        named[(notification.entity_type, notification.entity_name)] = None
    last = max([after, *(number for number, _ in numbered)])
    return ConfigChanges(last, tuple(named), tuple(c for _, c in numbered), tuple(malformed))


def purge_expired_changes(
    children: tuple[str, ...], now_ms: int, limit: int = MAX_PURGED_PER_ROUND
) -> ZkScript[int]:
    """Delete notifications created more than CHANGE_EXPIRATION_MS ago, oldest first, at most
    `limit`; stops at the first younger one (the sequence follows creation). How many went.
    Every broker does this: one that finds a notification already gone goes on."""
    purged = 0
    for child in sorted(children, key=lambda c: _sequence_of(c) or 0)[:limit]:
        path = f"{zk_data.CONFIG_CHANGES_PATH}/{child}"
        stat = yield from exists(path)
        if stat is None:
            continue
        if now_ms - stat.ctime <= CHANGE_EXPIRATION_MS:
            break
        with contextlib.suppress(NoNodeError):
            yield from delete(path)
            purged += 1
    return purged


def _sequence_of(child: str) -> int | None:
    digits = child.removeprefix(zk_data.CONFIG_CHANGE_PREFIX)
    if digits == child or not digits.isdigit():
        return None
    return int(digits)
