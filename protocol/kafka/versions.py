"""What a Kafka listener advertises in ApiVersions: (min, max) per api key.

Ranges stop below the versions that need topic IDs (KIP-516: Metadata 10+ carries a zero
UUID, Fetch 13+ and Produce 13 are not offered), so clients use topic names throughout.
Produce is advertised from 0, as Kafka 4 does, because librdkafka before 2.6 stops compressing
unless it is (KAFKA-18659); a request below `DECODED_MIN` is refused as an unsupported
version. docs/kafka.md has the table with what each API does here.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ADVERTISED", "API_VERSIONS_KEY", "DECODED"]

API_VERSIONS_KEY: Final = 18

# api key -> (min, max) version advertised.
ADVERTISED: Final[dict[int, tuple[int, int]]] = {
    0: (0, 9),  # Produce
    1: (4, 12),  # Fetch (KIP-227 sessions from 7)
    2: (1, 7),  # ListOffsets (7: max timestamp, KIP-734)
    3: (0, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch
    10: (0, 3),  # FindCoordinator
    18: (0, 3),  # ApiVersions
    22: (0, 4),  # InitProducerId
    23: (2, 4),  # OffsetForLeaderEpoch
}

# api key -> (min, max) version this listener decodes (kio has no Produce below 3).
DECODED: Final[dict[int, tuple[int, int]]] = {
    key: (3 if key == 0 else low, high) for key, (low, high) in ADVERTISED.items()
}
