"""A fake broker for controller tests: a trio TCP server that records controller requests.

It decodes frames with the real protocol codec and answers LeaderAndIsr, UpdateMetadata and
StopReplica with error_code 0, so the controller's channel sees a well-behaved broker.
"""

from __future__ import annotations

from typing import Any

import trio

from protocol.apis import ApiKey
from protocol.codec import Request, decode_request, encode_response
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import (
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

__all__ = ["FakeBroker"]

_RESPONSES: dict[int, Any] = {
    ApiKey.LEADER_AND_ISR: LeaderAndIsrResponse(error_code=0),
    ApiKey.UPDATE_METADATA: UpdateMetadataResponse(error_code=0),
    ApiKey.STOP_REPLICA: StopReplicaResponse(error_code=0),
}


class FakeBroker:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.host = "127.0.0.1"
        self.port = 0
        self.requests: list[Request] = []

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._serve_connection, listeners)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while True:
                try:
                    data = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return
                if not data:
                    return
                decoder.receive_data(data)
                while (body := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(body, bytes)
                    request = decode_request(body)
                    self.requests.append(request)
                    header = request.header
                    response = _RESPONSES[header.api_key]
                    await stream.send_all(
                        encode_response(
                            header.correlation_id, header.api_key, header.api_version, response
                        )
                    )

    # --- what was received ---------------------------------------------------------------

    def bodies(self, kind: type[Any]) -> list[Any]:
        return [r.body for r in self.requests if isinstance(r.body, kind)]

    def leader_and_isr(self) -> list[LeaderAndIsrRequest]:
        return self.bodies(LeaderAndIsrRequest)

    def update_metadata(self) -> list[UpdateMetadataRequest]:
        return self.bodies(UpdateMetadataRequest)

    def stop_replica(self) -> list[StopReplicaRequest]:
        return self.bodies(StopReplicaRequest)

    def latest_metadata(self) -> dict[tuple[str, int], UpdateMetadataPartitionState]:
        """Partition states as the last UpdateMetadata says (empty before any)."""
        received = self.update_metadata()
        if not received:
            return {}
        return {(s.topic_name, s.partition_index): s for s in received[-1].partition_states}

    def latest_leader_and_isr_states(
        self,
    ) -> dict[tuple[str, int], LeaderAndIsrPartitionState]:
        """(topic, partition) -> the latest LeaderAndIsr state received for it."""
        return {
            (s.topic_name, s.partition_index): s
            for request in self.leader_and_isr()
            for s in request.partition_states
        }

    def stopped(self) -> set[tuple[str, int, bool]]:
        """(topic, partition, delete) for every StopReplica partition received."""
        return {
            (t.topic_name, p.partition_index, p.delete_partition)
            for request in self.stop_replica()
            for t in request.topic_states
            for p in t.partition_states
        }

    def latest_leader_and_isr(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (leader, leader_epoch), the latest LeaderAndIsr per partition."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for request in self.leader_and_isr():
            for s in request.partition_states:
                out[(s.topic_name, s.partition_index)] = (s.leader, s.leader_epoch)
        return out
