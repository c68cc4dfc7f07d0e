"""Cluster-unique producer ids for InitProducerId (Kafka's ProducerIdManager, ZooKeeper mode).

Ids are handed out from a block this broker claimed in `/latest_producer_id_block`; when the
block runs out the next is claimed. One claim at a time: concurrent InitProducerId requests
wait for it rather than each claiming a block.
"""

from __future__ import annotations

import trio

from controller.zk_client import ZkClient
from controller.zk_producer_ids import ProducerIdBlock, claim_producer_id_block

__all__ = ["ProducerIdManager"]


class ProducerIdManager:
    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._lock = trio.Lock()

    async def generate_producer_id(self) -> int:
        """The next unused id. Raises ZkError / ZkDataError when no block can be claimed."""
        async with self._lock:
            if self._block is None or self._next_id > self._block.block_end:
                self._block = await self._zk.run(claim_producer_id_block(self._broker_id))
                self._next_id = self._block.block_start
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
