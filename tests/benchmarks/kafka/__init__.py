"""Apache Kafka 3.9 for the peer benchmark: its jars from Maven (jars.py) and a 3-broker
cluster in ZooKeeper mode on loopback (cluster.py). docs/performance.md, "Peers"."""
