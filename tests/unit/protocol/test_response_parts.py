"""encode_response_parts: the same frame as encode_response, large records as their own pieces."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.apis import ApiKey
from protocol.codec import OUT_OF_LINE_BYTES, encode_response, encode_response_parts
from protocol.messages.fetch import FetchPartitionData, FetchResponse, FetchTopicResponse
from protocol.messages.metadata import MetadataResponse

# Around the threshold, and well below it; a repeated byte keeps hypothesis fast.
_SIZES = st.sampled_from([0, 1, 100, OUT_OF_LINE_BYTES - 1, OUT_OF_LINE_BYTES, 300_000])


@st.composite
def fetch_responses(draw: st.DrawFn) -> FetchResponse:
    topics = []
    for t in range(draw(st.integers(0, 3))):
        partitions = tuple(
            FetchPartitionData(
                p,
                draw(st.sampled_from([0, 6])),
                draw(st.integers(-1, 2**40)),
                0,
                bytes([p % 256]) * draw(_SIZES),
            )
            for p in range(draw(st.integers(0, 3)))
        )
        topics.append(FetchTopicResponse(f"topic-{t}", partitions))
    return FetchResponse(0, tuple(topics), 0, draw(st.integers(0, 2**31 - 1)))


@settings(max_examples=150, deadline=None)
@given(fetch_responses(), st.integers(0, 2**31 - 1), st.sampled_from([0, 1, 12]))
def test_the_pieces_join_into_the_very_frame_encode_response_makes(
    response: FetchResponse, correlation_id: int, version: int
) -> None:
    parts = encode_response_parts(correlation_id, ApiKey.FETCH, version, response)
    assert b"".join(parts) == encode_response(correlation_id, ApiKey.FETCH, version, response)
    large = [
        p.records
        for t in response.responses
        for p in t.partitions
        if len(p.records) >= OUT_OF_LINE_BYTES
    ]
    # Each large records object is sent as it is (the same object: no copy made).
    assert [part for part in parts if any(part is r for r in large)] == large
    assert len(parts) == (1 if not large else 2 * len(large) + 1)


def test_other_responses_are_one_piece() -> None:
    response = MetadataResponse(brokers=(), cluster_id="c", controller_id=1, topics=())
    assert encode_response_parts(5, ApiKey.METADATA, 1, response) == [
        encode_response(5, ApiKey.METADATA, 1, response)
    ]
