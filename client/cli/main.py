"""The `highwater` command line: the entry point and the commands too small for a module.

Client commands (topics, configs, produce, consume, groups, cluster describe, elect-leaders,
reassign, perf) live in the other modules of client/cli/; `dev` (the local cluster) in
client/cli/dev.py. `broker` is here because this is the one client-side module allowed to import
the broker (see pyproject's import contracts). An unexpected error prints one line and a hint;
with HIGHWATER_DEBUG=1 its traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
import trio

from client.cli.acls import acls
from client.cli.common import exception_leaves, readable_client_errors
from client.cli.configs import configs
from client.cli.consume import consume
from client.cli.dev import dev
from client.cli.dump_log import dump_file
from client.cli.elect import elect_leaders
from client.cli.groups import groups
from client.cli.perf import perf
from client.cli.produce import produce
from client.cli.reassign import reassign
from client.cli.topics import cluster, topics
from client.cli.users import users

__all__ = ["main"]

CONFIG_ERROR_EXIT = 2
DEBUG_ENV = "HIGHWATER_DEBUG"


class _Commands(click.Group):
    """Runs a command; an exception no command expected becomes one line, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BaseException as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            if any(isinstance(leaf, KeyboardInterrupt) for leaf in exception_leaves(exc)):
                click.echo("interrupted", err=True)
                sys.exit(130)
            leaf = next(exception_leaves(exc), exc)  # the first of a group's errors
            message = str(leaf).splitlines()[0] if str(leaf) else ""
            click.echo(
                f"Error: unexpected {type(leaf).__name__}"
                + (f": {message}" if message else "")
                + f" (run again with {DEBUG_ENV}=1 for the traceback)",
                err=True,
            )
            sys.exit(1)


@click.group(cls=_Commands)
@click.version_option(package_name="highwater")
def main() -> None:
    """Highwater: a small Kafka-like replicated log.

    Client commands take -b/--bootstrap-server HOST:PORT[,...] (default: $HIGHWATER_BOOTSTRAP,
    else 127.0.0.1:9092).
    """


main.add_command(topics)
main.add_command(produce)
main.add_command(consume)
main.add_command(cluster)
main.add_command(groups)
main.add_command(perf)
main.add_command(dev)
main.add_command(elect_leaders)
main.add_command(reassign)
main.add_command(configs)
main.add_command(users)
main.add_command(acls)


@main.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="server.properties file (Kafka's names); without it, only --override settings.",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a config key, overriding the file (repeatable).",
)
def broker(config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Run a broker in the foreground until SIGTERM or Ctrl-C."""
    from broker.config import ConfigError, load_config
    from broker.main import run_broker

    try:
        config = load_config(config_path, overrides)
    except ConfigError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(CONFIG_ERROR_EXIT)
    with readable_client_errors():
        status = trio.run(run_broker, config)
    sys.exit(status)


@main.command("dump-log")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--records", is_flag=True, help="Also decode and print every record.")
def dump_log(files: tuple[Path, ...], records: bool) -> None:
    """Print the batches of .log segments (or the entries of .index / .timeindex files)."""
    try:
        for path in files:
            for line in dump_file(path, records=records):
                click.echo(line)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as `consume` does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as exc:
        raise click.ClickException(str(exc)) from exc


if __name__ == "__main__":
    main()
