"""The Highwater broker: trio servers around pure replication logic and the log engine."""
