"""The clients' settings table (client/settings.py): the clients' defaults come from it, the
CLI's -X names are its entries, and docs/client-settings.md is rendered from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from client import settings_doc
from client.admin import Admin
from client.cli.properties import ADMIN_PROPERTIES, CONSUMER_PROPERTIES, PRODUCER_PROPERTIES
from client.consumer import Consumer
from client.consumer.config import CONSUMER_DEFAULTS, ConsumerConfig
from client.producer import Producer
from client.producer.config import PRODUCER_DEFAULTS
from client.settings import ADMIN_SETTINGS, CONSUMER_SETTINGS, PRODUCER_SETTINGS
from protocol.compression import Compression


def test_the_client_settings_page_is_current() -> None:
    """Regenerate with `python -m client.settings_doc` after changing the settings table."""
    text = settings_doc.DOC.read_text(encoding="utf-8")
    assert settings_doc.update(text) == text, "run: python -m client.settings_doc"
    assert settings_doc.main(["--check"]) == 0


def test_the_page_check_fails_when_stale_and_the_rewrite_fixes_it(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(f"before\n{settings_doc.START}\nstale\n{settings_doc.END}\nafter\n")
    assert settings_doc.main(["--check", "--file", str(doc)]) == 1
    assert settings_doc.main(["--file", str(doc)]) == 0
    text = doc.read_text()
    assert "| `linger.ms` | `linger_ms` | long | `5` |" in text and "stale" not in text
    assert settings_doc.main(["--check", "--file", str(doc)]) == 0


def test_the_producer_takes_its_defaults_from_the_table() -> None:
    producer = Producer("127.0.0.1:1")
    assert producer.config == PRODUCER_DEFAULTS
    assert (producer.acks, producer.config.linger_ms, producer.config.batch_size) == (-1, 5, 16384)
    assert producer.config.compression is Compression.NONE
    assert producer.enable_idempotence is True
    assert producer.metadata.request_timeout_ms == 30_000
    assert producer.metadata.metadata_max_age_ms == 300_000


def test_the_producer_config_is_checked_and_frozen() -> None:
    producer = Producer("127.0.0.1:1", acks=1, compression="zstd", linger_ms=0)
    assert (producer.config.acks, producer.config.compression) == (1, Compression.ZSTD)
    assert producer.config.enable_idempotence is False  # acks=1 turns it off, unasked
    with pytest.raises(AttributeError):
        producer.config.linger_ms = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="acks"):
        Producer("127.0.0.1:1", acks=2)
    with pytest.raises(ValueError, match="positive"):
        Producer("127.0.0.1:1", batch_size=0)


def test_the_consumer_takes_its_defaults_from_the_table() -> None:
    consumer = Consumer("127.0.0.1:1")
    assert consumer.config == CONSUMER_DEFAULTS
    assert consumer.config.auto_offset_reset == "latest"
    assert (consumer.config.fetch_max_wait_ms, consumer.max_poll_records) == (500, 500)
    assert consumer.metadata.retry_backoff_ms == 100
    with pytest.raises(ValueError, match="auto_offset_reset"):
        ConsumerConfig(auto_offset_reset="oldest")
    with pytest.raises(ValueError, match="needs a group_id"):
        Consumer("127.0.0.1:1", group_instance_id="i")


def test_the_admin_takes_its_defaults_from_the_table() -> None:
    admin = Admin("127.0.0.1:1")
    assert admin.request_timeout_ms == 30_000
    assert (admin.metadata.client_id, admin.metadata.retry_backoff_ms) == ("highwater-admin", 100)


@pytest.mark.parametrize(
    ("settings", "known"),
    [
        (PRODUCER_SETTINGS, PRODUCER_PROPERTIES),
        (CONSUMER_SETTINGS, CONSUMER_PROPERTIES),
        (ADMIN_SETTINGS, ADMIN_PROPERTIES),
    ],
)
def test_every_entry_is_a_keyword_argument_the_cli_knows(settings, known) -> None:  # type: ignore[no-untyped-def]
    names = {s.key for s in settings} - (
        {"bootstrap.servers"} if known is ADMIN_PROPERTIES else set()
    )
    assert set(known) == names
    for s in settings:
        if s.key in known:
            assert known[s.key][0] == s.attribute


def test_each_default_parses_to_the_clients_default() -> None:
    for s in PRODUCER_SETTINGS:
        if s.attribute in PRODUCER_DEFAULTS.__dataclass_fields__ and s.key != "enable.idempotence":
            value = s.default_value()
            if s.key == "compression.type":
                assert value == PRODUCER_DEFAULTS.compression.name.lower()
            else:
                assert value == getattr(PRODUCER_DEFAULTS, s.attribute), s.key
    for s in CONSUMER_SETTINGS:
        if s.attribute in CONSUMER_DEFAULTS.__dataclass_fields__:
            assert s.default_value() == getattr(CONSUMER_DEFAULTS, s.attribute), s.key
