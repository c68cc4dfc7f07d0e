"""The `highwater` command line: the entry point and the commands too small for a module.

Client commands (topics, configs, produce, consume, groups, cluster describe, elect-leaders,
reassign, perf) live in the other modules of client/cli/; `dev` (the local cluster) in
client/cli/dev.py. `broker` is here because this is the one client-side module allowed to import
the broker (see pyproject's import contracts). An unexpected error prints one line and a hint;
with HIGHWATER_DEBUG=1 its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["LAZY_COMMANDS", "main"]

CONFIG_ERROR_EXIT = 2
DEBUG_ENV = "HIGHWATER_DEBUG"

# Each command's module is imported only when that command runs (or `--help` lists them all),
# so `highwater produce` does not pay for the admin, group and perf modules' imports, about
# 40% of a one-record `produce`'s time (docs/operations.md, "Start-up").
LAZY_COMMANDS: dict[str, str] = {
    "topics": "client.cli.topics:topics",
    "produce": "client.cli.produce:produce",
    "consume": "client.cli.consume:consume",
    "cluster": "client.cli.topics:cluster",
    "groups": "client.cli.groups:groups",
    "perf": "client.cli.perf:perf",
    "dev": "client.cli.dev:dev",
    "elect-leaders": "client.cli.elect:elect_leaders",
    "reassign": "client.cli.reassign:reassign",
    "configs": "client.cli.configs:configs",
    "users": "client.cli.users:users",
    "acls": "client.cli.acls:acls",
}


class _Commands(click.Group):
    """Loads a command's module when it is asked for (LAZY_COMMANDS) and runs the command; an
    exception no command expected becomes one line, not a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BaseException as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            from client.lifecycle import exception_leaves  # trio: not for --version or --help

            leaves = list(exception_leaves(exc))
            if any(isinstance(leaf, BrokenPipeError) for leaf in leaves):
                _stop_writing_stdout()
                sys.exit(0)
            if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
                click.echo("interrupted", err=True)
                sys.exit(130)
            leaf = leaves[0] if leaves else exc  # the first of a group's errors
            message = str(leaf).splitlines()[0] if str(leaf) else ""
            click.echo(
                f"Error: unexpected {type(leaf).__name__}"
                + (f": {message}" if message else "")
                + f" (run again with {DEBUG_ENV}=1 for the traceback)",
                err=True,
            )
            sys.exit(1)


def _stop_writing_stdout() -> None:
    """The reader of our stdout went away (`| head`): what is left unwritten goes nowhere,
    so Python's flush of stdout at exit does not fail on the same broken pipe. The command
    ends quietly with status 0."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@click.group(cls=_Commands)
@click.version_option(package_name="highwater")
def main() -> None:
    """Highwater: a small Kafka-like replicated log.

    Client commands take -b/--bootstrap-server HOST:PORT[,...] (default: $HIGHWATER_BOOTSTRAP,
    else 127.0.0.1:9092).
    """


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
    import trio

    from broker.config import ConfigError, load_config
    from broker.main import run_broker
    from client.cli.common import readable_client_errors

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
    from client.cli.dump_log import dump_file

    try:
        for path in files:
            for line in dump_file(path, records=records):
                click.echo(line)
    except BrokenPipeError:
        raise  # the reader went away (`| head`): invoke ends the command quietly
    except OSError as exc:
        raise click.ClickException(str(exc)) from exc


if __name__ == "__main__":
    main()
