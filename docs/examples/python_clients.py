"""The Python clients on one page (docs/operations.md, "Python clients").

    python docs/examples/python_clients.py [BOOTSTRAP] [TOPIC]

Creates TOPIC (3 partitions, RF=3, min.insync.replicas=2) unless it exists, produces ten
keyed records with the async Producer, reads them back as a member of a consumer group and
commits; then the same with the blocking clients, which run the async ones on a thread of
their own. Run again, it reads only the records of that run (the group's committed offsets).
"""

from __future__ import annotations

import sys

import trio

from client.admin import Admin
from client.blocking import BlockingConsumer, BlockingProducer
from client.consumer import Consumer, ConsumerRecord
from client.errors import HighwaterClientError
from client.producer import Producer
from client.runtime import tune_garbage_collector

RECORDS = 10


async def with_trio(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap) as admin:
        try:
            await admin.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
        except HighwaterClientError as exc:
            if exc.name != "TOPIC_ALREADY_EXISTS":
                raise
            print(f"{topic} exists: the group goes on from its committed offsets")
    async with Producer(bootstrap) as producer:  # acks=all, idempotent, linger.ms 5: Kafka's
        for i in range(RECORDS):
            # `send` queues the record and returns a future; awaiting it waits for the ack
            delivery = await producer.send(topic, b"order-%d" % i, key=b"customer-%d" % (i % 3))
        last = await delivery
        print(f"produced {RECORDS}; the last is partition {last.partition} offset {last.offset}")
    async with Consumer(bootstrap, group_id="example", auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        seen = 0
        while seen < RECORDS:
            for record in await consumer.poll(timeout_ms=1_000):
                seen += 1
                print(f"  {record.partition}/{record.offset} {record.key!r} {record.value!r}")
        await consumer.commit()  # the group's offsets, for the next member to start from


def blocking(bootstrap: str, topic: str) -> None:
    with BlockingProducer(bootstrap) as producer:
        metadata = producer.send(topic, b"from plain Python").result(timeout=30)
        print(f"blocking produce: partition {metadata.partition} offset {metadata.offset}")
    with BlockingConsumer(bootstrap, group_id="example") as consumer:
        consumer.subscribe([topic])  # the group committed up to here: only the new record
        records: list[ConsumerRecord] = []
        while not records:
            records = consumer.poll(timeout_ms=1_000)
        print(f"blocking consume: {records[0]}")
        consumer.commit()


if __name__ == "__main__":
    bootstrap = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092"
    topic = sys.argv[2] if len(sys.argv) > 2 else "orders"
    tune_garbage_collector()  # optional: a process that moves many records (docs/performance.md)
    trio.run(with_trio, bootstrap, topic)
    blocking(bootstrap, topic)
