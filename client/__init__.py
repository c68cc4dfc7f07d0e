"""Highwater clients: producer, consumer, admin, and the `highwater` command line."""
