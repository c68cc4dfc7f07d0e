"""The `highwater` command line."""

from __future__ import annotations

import click

__all__ = ["main"]


@click.group()
@click.version_option(package_name="highwater")
def main() -> None:
    """Highwater: a small Kafka-like replicated log."""
