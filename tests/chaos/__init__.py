"""Chaos runs: a workload against a real cluster under injected faults, and a checker."""
