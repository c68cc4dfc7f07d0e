"""client/cli/quota_configs.py: kafka-configs' entity flags and --add-config, and the lines
`configs describe --entity-type users|clients` prints."""

from __future__ import annotations

import click
import pytest

from client.cli.quota_configs import parse_add_config, quota_entity, quota_lines
from client.quota_admin import QuotaEntity


def test_add_config_splits_on_commas_outside_brackets() -> None:
    assert parse_add_config(["producer_byte_rate=1024,consumer_byte_rate=2048", "a=[x,y]"]) == {
        "producer_byte_rate": "1024",
        "consumer_byte_rate": "2048",
        "a": "x,y",
    }
    with pytest.raises(click.BadParameter):
        parse_add_config(["producer_byte_rate"])


@pytest.mark.parametrize(
    ("options", "entity"),
    [
        (("users", "alice", False, None, False, None, False), QuotaEntity(user="alice")),
        (("users", None, True, None, False, None, False), QuotaEntity(user=None)),
        (("clients", "app", False, None, False, None, False), QuotaEntity(client_id="app")),
        ((None, None, False, "alice", False, None, True), QuotaEntity("alice", None)),
        ((None, None, False, None, True, "app", False), QuotaEntity(None, "app")),
    ],
)
def test_entity_flags_name_kafkas_entities(
    options: tuple[str | None, str | None, bool, str | None, bool, str | None, bool],
    entity: QuotaEntity,
) -> None:
    assert quota_entity(options, describing=False) == entity


def test_describing_a_whole_entity_type_names_no_entity() -> None:
    assert quota_entity(("users", None, False, None, False, None, False), describing=True) is None
    with pytest.raises(click.UsageError, match="--entity-name"):
        quota_entity(("users", None, False, None, False, None, False), describing=False)
    with pytest.raises(click.UsageError, match="not both"):
        quota_entity(("users", "a", True, None, False, None, False), describing=False)


def test_lines_are_kafka_configs_lines() -> None:
    found = {
        QuotaEntity(user="alice"): {"producer_byte_rate": 1024.0},
        QuotaEntity(None, "app"): {"consumer_byte_rate": 1.0, "producer_byte_rate": 2.0},
    }
    assert quota_lines(found) == [
        "Quota configs for the default user-principal, client-id 'app' are "
        "consumer_byte_rate=1.0, producer_byte_rate=2.0",
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0",
    ]
    assert quota_lines({}) == ["No client quotas set."]
