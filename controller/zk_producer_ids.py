"""Producer id blocks in ZooKeeper (Kafka's `/latest_producer_id_block`, KIP-98).

Any broker answers InitProducerId from a block of ids it claimed for itself. A claim is a
compare-and-set of the znode on the version it read, so two brokers claiming at once never get
the same block: the loser reads again and takes the next one. Ids are never reused, even across
restarts (a restarted broker claims a fresh block; the rest of its old one is skipped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from controller.zk_data import ZkDataError
from controller.zk_script import ZkScript, create, get_data, set_data
from controller.zk_types import BadVersionError, NodeExistsError

__all__ = [
    "PRODUCER_ID_BLOCK_PATH",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdBlock",
    "claim_producer_id_block",
]

PRODUCER_ID_BLOCK_PATH: Final = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE: Final = 1000  # Kafka's
MAX_PRODUCER_ID: Final = 2**63 - 1
_MAX_CLAIM_ATTEMPTS: Final = 20


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids [block_start, block_end], both inclusive, claimed by `broker`."""

    broker: int
    block_start: int
    block_end: int

    def encode(self) -> bytes:
        # Kafka writes the bounds as strings (JSON numbers may lose precision elsewhere).
        obj = {
            "version": 1,
            "broker": self.broker,
            "block_start": str(self.block_start),
            "block_end": str(self.block_end),
        }
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        try:
            obj = json.loads(data.decode("utf-8"))
            block = cls(int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ZkDataError(f"producer id block: {exc}") from exc
        if not 0 <= block.block_start <= block.block_end <= MAX_PRODUCER_ID:
            raise ZkDataError(f"producer id block: bad bounds {block}")
        return block

    def next_for(self, broker: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        if self.block_end > MAX_PRODUCER_ID - size:
            raise ZkDataError("producer ids exhausted")
        return ProducerIdBlock(broker, self.block_end + 1, self.block_end + size)


def claim_producer_id_block(
    broker: int, size: int = PRODUCER_ID_BLOCK_SIZE
) -> ZkScript[ProducerIdBlock]:
    """Claim the next block for `broker` (the first one is [0, size-1]). A corrupt znode is an
    error, never silently restarted at 0: that could hand out ids already in use."""
    for _ in range(_MAX_CLAIM_ATTEMPTS):
        found = yield from get_data(PRODUCER_ID_BLOCK_PATH)
        if found is None:
            block = ProducerIdBlock(broker, 0, size - 1)
            try:
                yield from create(PRODUCER_ID_BLOCK_PATH, block.encode())
            except NodeExistsError:
                continue
            return block
        data, stat = found
        block = ProducerIdBlock.decode(data).next_for(broker, size)
        try:
            yield from set_data(PRODUCER_ID_BLOCK_PATH, block.encode(), stat.version)
        except BadVersionError:
            continue  # another broker claimed one meanwhile
        return block
    raise ZkDataError(f"could not claim a producer id block in {_MAX_CLAIM_ATTEMPTS} attempts")
