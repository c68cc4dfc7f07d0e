"""DescribeCluster (Kafka listener only): the brokers on the caller's listener, the cluster id
and the controller, from this broker's metadata cache, as Metadata answers them (the Java
AdminClient's describeCluster asks this when a broker lists it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.context import SESSION, BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode

__all__ = ["handle_describe_cluster"]

_NO_OPERATIONS = -(2**31)  # cluster_authorized_operations not asked for (or not served)


@dataclass(frozen=True, slots=True)
class DescribedBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class DescribeClusterResult:
    error_code: int
    cluster_id: str
    controller_id: int
    brokers: tuple[DescribedBroker, ...]
    error_message: str | None = None
    cluster_authorized_operations: int = _NO_OPERATIONS
    throttle_time_ms: int = 0


async def handle_describe_cluster(
    ctx: BrokerContext, header: RequestHeader, request: Any
) -> DescribeClusterResult:
    cache = ctx.metadata
    brokers = cache.brokers_on(SESSION.get().listener)
    return DescribeClusterResult(
        ErrorCode.NONE,
        ctx.cluster_id or "",
        cache.controller_id,
        tuple(
            DescribedBroker(b.node_id, b.host, b.port, b.rack)
            for b in (brokers[i] for i in sorted(brokers))
        ),
    )
