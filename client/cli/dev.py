"""`highwater dev up|status|down`: a local ZooKeeper plus brokers as background processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from client.cli import local_cluster
from client.cli.zookeeper_server import ZooKeeperError

__all__ = ["dev"]

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def _readable_errors() -> Iterator[None]:
    """Expected failures become `Error: ...` and exit status 1, without a traceback."""
    try:
        yield
    except BrokenPipeError:
        raise  # the reader of our stdout went away (`| head`): main ends quietly
    except (local_cluster.ClusterError, ZooKeeperError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


def _dir_option(func: F) -> F:
    option = click.option(
        "--dir",
        "root",
        type=click.Path(file_okay=False, path_type=Path),
        default=local_cluster.DEFAULT_DIR,
        show_default=True,
        help="Directory holding the cluster's pid files, configs, data and logs.",
    )
    return option(func)


@click.group()
def dev() -> None:
    """Run a local cluster (ZooKeeper + brokers on 127.0.0.1) for development."""


@dev.command()
@_dir_option
@click.option(
    "--brokers",
    type=click.IntRange(1, 64),
    default=local_cluster.DEFAULT_BROKERS,
    show_default=True,
    help="Number of brokers (ids 1..N).",
)
@click.option(
    "--base-port",
    type=click.IntRange(1, 65535 - 64 - local_cluster.METRICS_PORT_OFFSET),
    default=local_cluster.DEFAULT_BASE_PORT,
    show_default=True,
    help=(
        "Port of broker 1; broker N listens on base-port + N - 1, its metrics and status "
        f"page on base-port + {local_cluster.METRICS_PORT_OFFSET} + N - 1."
    ),
)
@click.option(
    "--zk-port",
    type=click.IntRange(1, 65535),
    default=local_cluster.DEFAULT_ZK_PORT,
    show_default=True,
    help="ZooKeeper client port (on 127.0.0.1).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(1, 600),
    default=local_cluster.START_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for the cluster to answer.",
)
@click.option(
    "--secure",
    is_flag=True,
    help="SASL_SSL on the client ports (a generated CA), SCRAM users, ACLs on, an admin user; "
    "prints the client settings.",
)
def up(
    root: Path, brokers: int, base_port: int, zk_port: int, timeout_s: float, secure: bool
) -> None:
    """Start ZooKeeper and the brokers in the background (keeping what already runs)."""
    with _readable_errors():
        local_cluster.up(
            root,
            brokers=brokers,
            base_port=base_port,
            zk_port=zk_port,
            echo=click.echo,
            timeout_s=timeout_s,
            secure=secure,
        )


@dev.command()
@_dir_option
def down(root: Path) -> None:
    """Stop exactly the processes `dev up` started (SIGTERM, then SIGKILL after a timeout)."""
    with _readable_errors():
        local_cluster.down(root, echo=click.echo)


@dev.command()
@_dir_option
def status(root: Path) -> None:
    """Show each process, its pid and whether it answers (exit 1 unless all run)."""
    with _readable_errors():
        healthy = local_cluster.status(root, echo=click.echo)
    if not healthy:
        raise SystemExit(1)
