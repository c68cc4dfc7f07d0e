"""broker/client_quotas.py: what each request is charged (a Produce its records, a consumer's
Fetch the records returned, every request its handler time), what is exempt (followers, the
controller's requests), and the throttle time set in the response."""

from __future__ import annotations

from broker.client_quotas import ClientQuotas, quota_entity_of, stored_quotas, with_throttle_time
from broker.core.client_quotas import DEFAULT_ENTITY, QuotaEntity
from broker.core.principal import Principal
from protocol.apis import ApiKey
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResponse,
)
from protocol.messages.metadata import MetadataResponse

ALICE = Principal("User", "alice")
NOW_MS = 1_000_000


def fetch(replica_id: int) -> FetchRequest:
    return FetchRequest(
        replica_id, 500, 1, 1 << 20, (FetchTopic("t", (FetchPartition(0, 0, 1 << 20),)),)
    )


def fetched(size: int) -> FetchResponse:
    return FetchResponse(
        0, (FetchTopicResponse("t", (FetchPartitionData(0, 0, 0, 0, b"r" * size),)),)
    )


def quotas(**configs: float) -> ClientQuotas:
    charged = ClientQuotas(window_ms=1000, window_count=11)
    charged.update({QuotaEntity(DEFAULT_ENTITY, None): dict(configs)})
    return charged


def test_a_consumer_fetch_is_charged_the_bytes_returned() -> None:
    charged = quotas(consumer_byte_rate=100.0)
    # 1500 B over the 10 s window: 150 B/s, half over the quota.
    throttle_ms = charged.charge(ALICE, "app", ApiKey.FETCH, fetch(-1), fetched(1500), 0.0, NOW_MS)
    assert throttle_ms == 5_000


def test_a_follower_fetch_is_exempt() -> None:
    charged = quotas(consumer_byte_rate=1.0, request_percentage=0.001)
    assert charged.charge(ALICE, "app", ApiKey.FETCH, fetch(2), fetched(10**6), 1.0, NOW_MS) == 0


def test_the_controllers_requests_are_exempt() -> None:
    charged = quotas(request_percentage=0.001)
    assert charged.charge(ALICE, "c", ApiKey.LEADER_AND_ISR, None, None, 5.0, NOW_MS) == 0
    assert charged.charge(ALICE, "c", ApiKey.METADATA, None, None, 5.0, NOW_MS) > 0


def test_handler_time_is_charged_as_a_percentage() -> None:
    charged = quotas(request_percentage=10.0)
    # 0.5 s of handler time over a 10 s window: 5 %.
    assert charged.charge(ALICE, "c", ApiKey.METADATA, None, None, 0.5, NOW_MS) == 0
    # 1.5 s more: 20 %, twice the quota.
    assert charged.charge(ALICE, "c", ApiKey.METADATA, None, None, 1.5, NOW_MS) == 10_000


def test_the_throttle_time_goes_in_the_response_that_has_one() -> None:
    response = MetadataResponse((), None, -1, ())
    assert with_throttle_time(response, 250).throttle_time_ms == 250
    assert with_throttle_time(response, 0) is response
    assert with_throttle_time(None, 250) is None  # acks=0: no response, only the mute


def test_stored_entities_become_quota_entities() -> None:
    assert quota_entity_of("users", "CN%3Da") == QuotaEntity("CN=a", None)
    assert quota_entity_of("users", "a/clients/<default>") == QuotaEntity("a", DEFAULT_ENTITY)
    assert quota_entity_of("clients", "app") == QuotaEntity(None, "app")
    assert quota_entity_of("topics", "t") is None
    found, problems = stored_quotas(
        {
            ("users", "a"): {"SCRAM-SHA-256": "salt=...", "producer_byte_rate": "10"},
            ("users", "b"): {"SCRAM-SHA-256": "salt=..."},
            ("clients", "c"): {"consumer_byte_rate": "lots"},
        }
    )
    assert found == {QuotaEntity("a", None): {"producer_byte_rate": 10.0}}
    assert problems == {"clients/c": {"consumer_byte_rate": "'lots' is not a number"}}


def test_without_any_quota_nothing_is_measured() -> None:
    charged = ClientQuotas(window_ms=1000, window_count=11)
    assert not charged.enabled
    assert charged.charge(ALICE, "c", ApiKey.FETCH, fetch(-1), fetched(10**6), 9.0, NOW_MS) == 0
    assert all(not list(m.sensors(NOW_MS)) for m in charged.managers.values())
    charged.update({QuotaEntity(None, "c"): {"request_percentage": 1.0}})
    assert charged.enabled
    charged.update({})
    assert not charged.enabled
