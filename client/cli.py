"""The `highwater` command line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from client import local_cluster
from client.dump_log import dump_file
from client.zookeeper_server import ZooKeeperError

__all__ = ["main"]


@click.group()
@click.version_option(package_name="highwater")
def main() -> None:
    """Highwater: a small Kafka-like replicated log."""


@contextmanager
def _readable_errors() -> Iterator[None]:
    """Turn expected failures into `Error: ...` and exit status 1, without a traceback."""
    try:
        yield
    except (local_cluster.ClusterError, ZooKeeperError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


def _dir_option(func: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--dir",
        "root",
        type=click.Path(file_okay=False, path_type=Path),
        default=local_cluster.DEFAULT_DIR,
        show_default=True,
        help="Directory holding the cluster's pid files, data and logs.",
    )(func)


@main.group()
def cluster() -> None:
    """Run a local Highwater cluster (for now: ZooKeeper only)."""


@cluster.command()
@_dir_option
@click.option(
    "--zk-port",
    type=click.IntRange(1, 65535),
    default=local_cluster.DEFAULT_ZK_PORT,
    show_default=True,
    help="ZooKeeper client port (on 127.0.0.1).",
)
def up(root: Path, zk_port: int) -> None:
    """Start the local cluster in the background; keep what already runs."""
    with _readable_errors():
        local_cluster.up(root, zk_port=zk_port, echo=click.echo)


@cluster.command()
@_dir_option
def down(root: Path) -> None:
    """Stop everything `up` started."""
    with _readable_errors():
        local_cluster.down(root, echo=click.echo)


@cluster.command()
@_dir_option
def status(root: Path) -> None:
    """Show each process, its pid and whether it answers (exit 1 unless all run)."""
    with _readable_errors():
        healthy = local_cluster.status(root, echo=click.echo)
    if not healthy:
        raise SystemExit(1)


@main.command("dump-log")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--records", is_flag=True, help="Also decode and print every record.")
def dump_log(files: tuple[Path, ...], records: bool) -> None:
    """Print the batches of .log segments (or the entries of .index / .timeindex files)."""
    with _readable_errors():
        for path in files:
            for line in dump_file(path, records=records):
                click.echo(line)
