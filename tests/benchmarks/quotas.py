"""Client quota benchmark: two producers on one cluster, one client-id with a
producer_byte_rate quota, one without.

Run: `.venv/bin/python -m tests.benchmarks.quotas`. Starts its own local cluster (`highwater
dev up`: ZooKeeper and 3 brokers in a temporary directory, Kafka's quota windows: 11 of 1 s),
creates a one-partition topic, then:
- the unthrottled client alone, then beside the other with no quota set, for baselines;
- for each quota (256 KiB/s, 1 MiB/s, 4 MiB/s): `configs alter --entity-type clients` sets it
  for client-id `throttled`, both clients produce 16 KiB records (acks=1, one request at a
  time, backing off for each throttle time) at once, and it prints the throttled client's
  rate over the whole run and after the first 11 s (Kafka's windows let a first burst of
  about 10 s of quota through), its largest throttle time, and the other client's rate.
Everything runs on this machine: the brokers, ZooKeeper and both clients share its cores.
"""

from __future__ import annotations

import argparse

import trio

from tests.benchmarks.replication import highwater, local_cluster
from tests.integration.cluster_harness import fetch_metadata
from tests.integration.quota_load import ProduceLoad, produce_for

KIB = 1024
QUOTAS = (256 * KIB, 1024 * KIB, 4096 * KIB)
TOPIC = "bench-quotas"
WARMUP_S = 11.0  # quota.window.num windows of quota.window.size.seconds


async def leader_port(base_port: int) -> int:
    for _ in range(100):
        meta = await fetch_metadata(base_port)
        for topic in meta.topics if meta is not None else ():
            if topic.name == TOPIC and topic.partitions and topic.partitions[0].leader_id >= 0:
                leader = topic.partitions[0].leader_id
                return next(b.port for b in meta.brokers if b.node_id == leader)
        await trio.sleep(0.1)
    raise SystemExit(f"no leader for {TOPIC}")


async def both(port: int, duration_s: float) -> tuple[ProduceLoad, ProduceLoad]:
    loads: dict[str, ProduceLoad] = {}

    async def run(client_id: str) -> None:
        loads[client_id] = await produce_for(
            "127.0.0.1", port, TOPIC, client_id, duration_s, warmup_s=WARMUP_S
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "throttled")
        nursery.start_soon(run, "free")
    return loads["throttled"], loads["free"]


def mib(rate: float) -> str:
    return f"{rate / (1024 * 1024):.2f} MiB/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per quota setting")
    parser.add_argument("--base-port", type=int, default=19192)
    parser.add_argument("--zk-port", type=int, default=32281)
    args = parser.parse_args()
    with local_cluster(args.base_port, args.zk_port) as (bootstrap, _):
        highwater(
            "topics", "create", TOPIC, "--partitions", "1", "--replication-factor", "1",
            bootstrap=bootstrap,
        )  # fmt: skip
        port = trio.run(leader_port, args.base_port)
        alone = trio.run(lambda: produce_for("127.0.0.1", port, TOPIC, "free", args.seconds))
        print(f"unthrottled client alone: {mib(alone.rate_bytes_per_s)}")
        noisy, free = trio.run(both, port, args.seconds)
        print(
            f"no quota set: the neighbour {mib(noisy.rate_bytes_per_s)}, "
            f"the client {mib(free.rate_bytes_per_s)}"
        )
        for quota in QUOTAS:
            entity = ("--entity-type", "clients", "--entity-name", "throttled")
            highwater(
                "configs", "alter", *entity, "--add-config", f"producer_byte_rate={quota}",
                bootstrap=bootstrap,
            )  # fmt: skip
            throttled, free = trio.run(both, port, args.seconds)
            highwater(
                "configs", "alter", *entity, "--delete-config", "producer_byte_rate",
                bootstrap=bootstrap,
            )  # fmt: skip
            print(
                f"quota {mib(quota)}: throttled client {mib(throttled.rate_bytes_per_s)} over "
                f"{throttled.elapsed_s:.0f} s ({throttled.rate_bytes_per_s / quota:.2f}x), "
                f"{mib(throttled.steady_bytes_per_s)} after {WARMUP_S:.0f} s "
                f"({throttled.steady_bytes_per_s / quota:.2f}x), "
                f"{throttled.throttled}/{throttled.requests} responses throttled, "
                f"max throttle {throttled.max_throttle_ms} ms; "
                f"unthrottled neighbour {mib(free.rate_bytes_per_s)} "
                f"({free.throttled} throttled)"
            )


if __name__ == "__main__":
    main()
