"""The group coordinator's decisions (Kafka's GroupCoordinatorService / GroupMetadataManager /
OffsetMetadataManager, KIP-848 consumer groups), IO-free: docs/groups.md."""
