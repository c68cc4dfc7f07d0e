"""Cost as the work grows (`make bench-curves`): idle CPU and RSS, controller failover and
controlled shutdown against the partition count, throughput against partitions and producers;
Highwater and, where it fits, Apache Kafka 3.9 in ZooKeeper mode (docs/performance.md)."""
