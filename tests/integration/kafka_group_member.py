"""A confluent-kafka (librdkafka) group member as its own process, for tests that kill one:
`python -m tests.integration.kafka_group_member BOOTSTRAP TOPIC GROUP ASSIGNOR OUT`. It
appends one JSON line per record read ({"p", "o"}) and per assignment change to OUT, and
commits automatically every 200 ms, until it is stopped (SIGTERM: it leaves the group)."""

from __future__ import annotations

import json
import signal
import sys
from typing import Any


def main(argv: list[str]) -> int:
    from confluent_kafka import Consumer

    bootstrap, topic, group, assignor, out_path = argv
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    with open(out_path, "a", buffering=1) as out:

        def changed(kind: str) -> Any:
            def record(consumer: Any, partitions: Any) -> None:
                out.write(json.dumps({kind: sorted(p.partition for p in partitions)}) + "\n")

            return record

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": assignor,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
            }
        )
        consumer.subscribe([topic], on_assign=changed("assign"), on_revoke=changed("revoke"))
        while not stopping:
            for message in consumer.consume(100, 0.2):
                if message.error() is None:
                    out.write(json.dumps({"p": message.partition(), "o": message.offset()}) + "\n")
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
