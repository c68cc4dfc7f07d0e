"""The broker's decisions, IO-free: replicas and partitions, the request handling of the
replication APIs, the follower and the ISR upkeep. The trio shells (broker/handlers,
replica_fetcher.py, isr_manager.py) and the simulator drive the same code."""
