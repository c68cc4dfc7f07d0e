"""Highwater beside its peers: NATS JetStream and Redis Streams, 3 nodes each.

Run: `make bench-peers` (or `python -m tests.benchmarks.peers [--runs N] [--quick] [--json]`).
One system at a time: start its 3 nodes on loopback, run the three measures `--runs` times,
stop it. How each is configured and why that is comparable: docs/performance.md, "Peers".
"""
