"""Which ACLs znodes get with zookeeper.set.acl (Kafka's ZkData.defaultAcls)."""

from __future__ import annotations

import pytest

from controller import zk_data
from controller.zk_acls import LITERAL_ROOT
from controller.zk_security import CLUSTER_ROOTS, Perm, ZnodeAcl, default_acls

CREATOR_ALL = ZnodeAcl(Perm.ALL, "auth", "")
WORLD_READ = ZnodeAcl(Perm.READ, "world", "anyone")


@pytest.mark.parametrize(
    "path",
    [
        zk_data.CONFIG_USERS_PATH,
        zk_data.CONFIG_USERS_PATH + "/admin",
        zk_data.CONFIG_BROKERS_PATH + "/<default>",
    ],
)
def test_credentials_and_broker_configs_are_the_brokers_alone(path: str) -> None:
    assert default_acls(path, secure=True) == (CREATOR_ALL,)


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/config",
        "/config/users-not",  # a prefix of a name is not its parent
        zk_data.CONTROLLER_PATH,
        zk_data.partition_state_path("t", 0),
        LITERAL_ROOT + "/Topic/t",
    ],
)
def test_the_rest_is_the_brokers_and_world_readable(path: str) -> None:
    assert default_acls(path, secure=True) == (CREATOR_ALL, WORLD_READ)


def test_without_set_acl_everything_is_open() -> None:
    assert default_acls(zk_data.CONFIG_USERS_PATH + "/admin", secure=False) == (
        ZnodeAcl(Perm.ALL, "world", "anyone"),
    )


def test_the_migration_walks_every_root_of_the_layout() -> None:
    for path in (
        zk_data.CONTROLLER_PATH,
        zk_data.CONTROLLER_EPOCH_PATH,
        zk_data.TOPICS_PATH,
        zk_data.CONFIG_USERS_PATH,
        zk_data.CLUSTER_ID_PATH,
        zk_data.DELETE_TOPICS_PATH,
        zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH,
        LITERAL_ROOT,
    ):
        assert "/" + path.split("/")[1] in CLUSTER_ROOTS
