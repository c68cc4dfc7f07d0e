"""One Kafka Metadata request (v1, every topic) to one chosen broker over a plain socket: a
Kafka client library answers metadata from whichever broker it likes, and the failover curve
needs each broker's own view."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

METADATA_KEY = 3
METADATA_VERSION = 1


@dataclass(frozen=True)
class KafkaPartition:
    index: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class KafkaMetadata:
    controller_id: int
    topics: dict[str, tuple[KafkaPartition, ...]]


def encode_request(correlation_id: int, client_id: str = "curves") -> bytes:
    name = client_id.encode()
    body = struct.pack(">hhih", METADATA_KEY, METADATA_VERSION, correlation_id, len(name))
    body += name + struct.pack(">i", -1)  # a null topic array: every topic
    return struct.pack(">i", len(body)) + body


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        text = self.data[self.at : self.at + length].decode()
        self.at += length
        return text

    def ints(self) -> tuple[int, ...]:
        return tuple(self.take(">i") for _ in range(self.take(">i")))


def decode_response(data: bytes) -> KafkaMetadata:
    """A Metadata v1 response without its size prefix."""
    r = _Reader(data)
    r.take(">i")  # correlation id
    for _ in range(r.take(">i")):
        r.take(">i")
        r.string()
        r.take(">i")
        r.string()  # rack
    controller_id = r.take(">i")
    topics = {}
    for _ in range(r.take(">i")):
        r.take(">h")
        name = r.string() or ""
        r.take(">b")  # is_internal
        partitions = []
        for _ in range(r.take(">i")):
            r.take(">h")
            index, leader = r.take(">i"), r.take(">i")
            partitions.append(KafkaPartition(index, leader, r.ints(), r.ints()))
        topics[name] = tuple(partitions)
    return KafkaMetadata(controller_id, topics)


def fetch(host: str, port: int, timeout_s: float = 2.0) -> KafkaMetadata | None:
    """The broker's metadata, or None when it does not answer."""
    try:
        with socket.create_connection((host, port), timeout_s) as sock:
            sock.sendall(encode_request(1))
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            return decode_response(_read_exactly(sock, size))
    except OSError:
        return None


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
