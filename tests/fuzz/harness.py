"""The two fuzz targets of an API, and what each input must satisfy.

Decoder target: the bytes of a connection go through the broker's own framing and request
decoding (protocol.framing.FrameDecoder, protocol.codec.decode_request); a frame error or a
RequestDecodeError is the documented answer (the broker closes that connection), anything
else is a crash, and a decode taking over `DECODE_HANG_S` a hang.

Handler target: a real broker in-process (its LogManager and logs in a directory, no sockets,
no ZooKeeper: admin requests answer NOT_CONTROLLER), on trio with an autojump clock so that
a request parked in the purgatory (a long-poll, acks=all) times out at once in virtual time.
It leads `t-0` and `t-1` (with data) and follows `f-0`. Each decoded request goes to the
API's handler, as broker/server.py calls it, and its response is encoded as the server does:
an exception from either is a crash; more than `HANDLER_HANG_S` of virtual time, or
`REAL_HANG_S` of real time, a hang. Stored data: each log's start, end and segment sizes
before and after the input must be equal for a read-only API, and for any API whose answer
carries only errors (a rejected input); at the end every stored batch still passes its CRC
and header checks.
"""

from __future__ import annotations

import concurrent.futures
import resource
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio
import trio.testing

from broker.config.broker_config import load_config
from broker.context import BrokerContext
from broker.core.replica_manager import ReplicaManager
from broker.handlers import HANDLERS
from broker.log.manager import LogManager
from broker.responses import encode
from protocol.apis import ApiKey
from protocol.codec import RequestDecodeError, RequestHeader, decode_request
from protocol.errors import FrameError, HighwaterError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES, NEED_DATA, FrameDecoder
from protocol.messages.common import BrokerEndpoint
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest
from protocol.records import Record, build_batch, iter_batch_headers
from protocol.topic_partition import TopicPartition
from tests.fuzz.targets import SEEDED_TOPIC
from tests.integration.fuzz_frames import error_codes

__all__ = ["DecoderTarget", "FuzzBroker", "Tally"]

ME: Final = 1
OTHER: Final = 2  # leads f-0, exists only on paper
CONTROLLER_EPOCH: Final = 1
DECODE_HANG_S: Final = 2.0
HANDLER_HANG_S: Final = 900.0  # virtual: above every wait a request may ask for (5 min)
REAL_HANG_S: Final = 60.0
# APIs that must never change stored data; the others only when they answer with errors only.
READ_ONLY: Final = frozenset(
    {
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.API_VERSIONS,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
    }
)

Signature = dict[TopicPartition, tuple[int, int, tuple[int, ...]]]


@dataclass
class Tally:
    """What one target did with its inputs."""

    inputs: int = 0
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    data_changes: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)  # how the inputs were answered

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    @property
    def clean(self) -> bool:
        return not (self.crashes or self.hangs or self.data_changes)


def _shown(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class DecoderTarget:
    def __init__(self) -> None:
        self.tally = Tally()

    def __call__(self, data: bytes) -> None:
        self.tally.inputs += 1
        started = time.monotonic()
        decoder = FrameDecoder(DEFAULT_MAX_FRAME_BYTES)
        decoder.receive_data(data)
        outcome = "incomplete frame"
        try:
            while True:
                body = decoder.next_frame()
                if body is NEED_DATA:
                    break
                assert isinstance(body, bytes)
                decode_request(body)
                outcome = "decoded"
        except FrameError:
            outcome = "bad frame"
        except RequestDecodeError:
            outcome = "undecodable request"
        except Exception:
            self.tally.crashes.append(f"{_shown(data)}\n{traceback.format_exc()}")
            outcome = "crash"
        elapsed = time.monotonic() - started
        if elapsed > DECODE_HANG_S:
            self.tally.hangs.append(f"{elapsed:.1f} s: {_shown(data)}")
        self.tally.count(outcome)


class FuzzBroker:
    """A broker in its own trio thread (autojump clock); `handle` runs one request in it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.tally = Tally()
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._done: trio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._thread_main, daemon=True)
        self._pool = concurrent.futures.ThreadPoolExecutor(1)

    def __enter__(self) -> FuzzBroker:
        _raise_open_file_limit()
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise self._error
        assert self._token is not None, "the fuzzed broker did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self._done is not None:
            done = self._done
            trio.from_thread.run_sync(done.set, trio_token=self._token)
        self._thread.join(60)
        self._pool.shutdown(wait=False)

    def _thread_main(self) -> None:
        try:
            trio.run(self._main, clock=trio.testing.MockClock(autojump_threshold=0))
        except BaseException as exc:  # reported by __enter__ or by `handle`
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        config = load_config(
            None,
            [
                f"broker.id={ME}",
                "zookeeper.connect=127.0.0.1:1",
                f"log.dirs={self.directory}",
                "log.segment.bytes=65536",
            ],
        )
        log_manager = LogManager([self.directory], config.log_config())
        log_manager.startup(0)
        self.ctx = BrokerContext(config, ReplicaManager(ME, log_manager))
        self.ctx.broker_epoch = 0  # as if registered: a broker takes controller requests only then
        try:
            await self._seed()
            self._done = trio.Event()
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._done.wait()
        finally:
            log_manager.shutdown(0)

    async def _seed(self) -> None:
        states = [
            LeaderAndIsrPartitionState(SEEDED_TOPIC, p, CONTROLLER_EPOCH, ME, 0, (ME,), 0, (ME,))
            for p in (0, 1)
        ]
        states.append(
            LeaderAndIsrPartitionState(
                "f", 0, CONTROLLER_EPOCH, OTHER, 0, (OTHER, ME), 0, (OTHER, ME)
            )
        )
        endpoints = (BrokerEndpoint(ME, "127.0.0.1", 1), BrokerEndpoint(OTHER, "127.0.0.1", 1))
        ctx = self.ctx
        header = RequestHeader(ApiKey.LEADER_AND_ISR, 1, 0, "seed")
        lai = LeaderAndIsrRequest(ME, CONTROLLER_EPOCH, 0, tuple(states), endpoints[1:])
        await HANDLERS[ApiKey.LEADER_AND_ISR](ctx, header, lai)
        metadata = UpdateMetadataRequest(
            ME,
            CONTROLLER_EPOCH,
            0,
            tuple(
                UpdateMetadataPartitionState(
                    s.topic_name,
                    s.partition_index,
                    s.controller_epoch,
                    s.leader,
                    s.leader_epoch,
                    s.isr,
                    s.partition_epoch,
                    s.replicas,
                )
                for s in states
            ),
            endpoints,
        )
        header = RequestHeader(ApiKey.UPDATE_METADATA, 0, 0, "seed")
        await HANDLERS[ApiKey.UPDATE_METADATA](ctx, header, metadata)
        for i in range(20):
            batch = build_batch([Record(b"seed-%d" % i, key=b"k%d" % (i % 3))], now_ms=1_000 + i)
            produce = ProduceRequest(
                1, 1000, (ProduceTopicData(SEEDED_TOPIC, (ProducePartitionData(i % 2, batch),)),)
            )
            header = RequestHeader(ApiKey.PRODUCE, 0, 0, "seed")
            await HANDLERS[ApiKey.PRODUCE](ctx, header, produce)
        assert all(log.log_end_offset == 10 for tp, log in self._logs() if tp[0] == SEEDED_TOPIC)

    def _logs(self) -> Iterator[tuple[TopicPartition, Any]]:
        return iter(sorted(self.ctx.replica_manager.log_manager.logs.items()))

    def _signature(self) -> Signature:
        return {
            tp: (log.log_start_offset, log.log_end_offset, tuple(s.size for s in log.segments))
            for tp, log in self._logs()
        }

    # -- one input -------------------------------------------------------------------------

    def handle(self, header: RequestHeader, body: Any) -> None:
        """Run one decoded request through its handler; record what went wrong."""
        self.tally.inputs += 1
        assert self._token is not None
        token = self._token
        future = self._pool.submit(
            trio.from_thread.run, self._handle, header, body, trio_token=token
        )
        try:
            future.result(timeout=REAL_HANG_S)
        except concurrent.futures.TimeoutError:
            self.tally.hangs.append(f"over {REAL_HANG_S} s real time: {_shown((header, body))}")
            raise  # the broker thread is stuck: no point going on

    async def _handle(self, header: RequestHeader, body: Any) -> None:
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            self.tally.count("not served (connection closed)")
            return
        before = self._signature()
        shown = _shown((header, body))
        with trio.move_on_after(HANDLER_HANG_S) as waited:
            try:
                response = await handler(self.ctx, header, body)
                if response is not None:
                    encode(header, response)
            except Exception:
                self.tally.crashes.append(f"{shown}\n{traceback.format_exc()}")
                self.tally.count("crash")
                return
        if waited.cancelled_caught:
            self.tally.hangs.append(f"over {HANDLER_HANG_S} s virtual time: {shown}")
            self.tally.count("hang")
            return
        codes = error_codes(response) if response is not None else []
        rejected = bool(codes) and all(code != 0 for code in codes)
        self.tally.count(
            "no response" if response is None else "rejected" if rejected else "answered"
        )
        if header.api_key in READ_ONLY or rejected:
            after = self._signature()
            if after != before:
                changed = sorted(
                    tp for tp in after.keys() | before.keys() if after.get(tp) != before.get(tp)
                )
                self.tally.data_changes.append(f"{changed} by {shown}")

    def check_stored_batches(self) -> list[str]:
        """Every stored batch is whole and passes its CRC check (no damage got in)."""
        problems = []

        async def check() -> None:
            for tp, log in self._logs():
                for segment in log.segments:
                    try:
                        for _ in iter_batch_headers(segment.log_path.read_bytes()):
                            pass
                    except HighwaterError as exc:
                        problems.append(f"{tp[0]}-{tp[1]} {segment.log_path.name}: {exc}")

        assert self._token is not None
        trio.from_thread.run(check, trio_token=self._token)
        return problems


def _raise_open_file_limit() -> None:
    """Accepted controller requests may create logs (three files each): allow many."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
