"""The compiled codecs (protocol/schema_compile.py) agree with the interpreted ones
(protocol/schema.py): same plain maps, same values, and every value the interpreted decoder
refuses is handed back to it (so its precise error is what the caller sees)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from hypothesis import given

from protocol.apis import ApiSpec
from protocol.errors import InvalidRequestError
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.schema import Int32, Since
from protocol.schema import decode_struct as interpreted_decode
from protocol.schema import encode_struct as interpreted_encode
from protocol.schema_compile import (
    _Fallback,
    compiled_decoder,
    compiled_encoder,
    decode_struct,
    encode_struct,
)
from tests.unit.protocol.strategies import FAST, api_version_id, api_versions, struct_strategy
from tests.unit.protocol.test_codec_malformed import _every_mutation

CASES = [
    pytest.param(spec, version, id=api_version_id((spec, version)))
    for spec, version in api_versions()
]


def _agree(cls: type, version: int, value: Any) -> None:
    plain = interpreted_encode(value, version)
    assert compiled_encoder(cls, version)(value) == plain  # the fast path, no fallback
    decoded = compiled_decoder(cls, version)(plain)
    assert decoded == interpreted_decode(cls, version, plain) == value
    assert type(decoded) is cls


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_compiled_codecs_agree_with_the_interpreted_ones(spec: ApiSpec, version: int) -> None:
    @FAST
    @given(request=struct_strategy(spec.request, version))
    def requests(request: Any) -> None:
        _agree(spec.request, version, request)

    @FAST
    @given(response=struct_strategy(spec.response, version))
    def responses(response: Any) -> None:
        _agree(spec.response, version, response)

    requests()
    responses()


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_whatever_the_interpreted_decoder_refuses_the_compiled_one_hands_back(
    spec: ApiSpec, version: int
) -> None:
    for cls in (spec.request, spec.response):
        for mutated, needle in _every_mutation(cls, version):
            with pytest.raises((_Fallback, KeyError)):
                compiled_decoder(cls, version)(mutated)
            with pytest.raises(InvalidRequestError) as refused:
                decode_struct(cls, version, mutated)
            assert needle in refused.value.message


@pytest.mark.parametrize(
    ("records", "acks", "needle"),
    [
        ("not bytes", 1, "field topic_data[0].partition_data[0].records: expected bin"),
        (b"x", 1 << 20, "field acks: 1048576 out of range for int16"),
        (b"x", True, "field acks: expected int16"),
    ],
)
def test_a_bad_value_to_encode_gets_the_interpreted_error(
    records: Any, acks: Any, needle: str
) -> None:
    request = ProduceRequest(
        acks, 1000, (ProduceTopicData("t", (ProducePartitionData(0, records),)),)
    )
    with pytest.raises(_Fallback):
        compiled_encoder(ProduceRequest, 0)(request)
    with pytest.raises(InvalidRequestError) as refused:
        encode_struct(request, 0)
    assert needle in refused.value.message


@dataclass(frozen=True, slots=True)
class _Stored:
    n: Int32
    tags: Annotated[tuple[str, ...], Since(1)] = field(default_factory=tuple)
    label: Annotated[str, Since(1)] = "none"


@dataclass(frozen=True, slots=True)
class _Checked:
    n: Int32

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("n must not be negative")


def test_a_slotted_message_is_built_without_its_init_and_gets_the_defaults_of_later_fields() -> (
    None
):
    assert compiled_decoder(_Stored, 0)({"n": 7}) == _Stored(7, (), "none")
    assert compiled_decoder(_Stored, 1)({"n": 7, "tags": ["a"], "label": "x"}) == _Stored(
        7, ("a",), "x"
    )
    assert hash(compiled_decoder(_Stored, 0)({"n": 7})) == hash(_Stored(7))


def test_a_message_with_a_post_init_still_goes_through_its_constructor() -> None:
    assert compiled_decoder(_Checked, 0)({"n": 1}) == _Checked(1)
    with pytest.raises(ValueError, match="must not be negative"):
        compiled_decoder(_Checked, 0)({"n": -1})
