"""The `highwater` command line: the entry point and the commands too small for a module.

Client commands (topics, configs, produce, consume, groups, cluster describe, elect-leaders,
reassign, perf) live in the other modules of client/cli/; `dev` (the local cluster) in
client/cli/dev.py. `broker` and `zookeeper-security-migration` are here because this is the one
client-side module allowed to import the broker (see pyproject's import contracts). An
unexpected error prints one line and a hint; with HIGHWATER_DEBUG=1 its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

import click

__all__ = ["LAZY_COMMANDS", "LazyCommand", "main"]

CONFIG_ERROR_EXIT = 2
DEBUG_ENV = "HIGHWATER_DEBUG"


# Each command's module is imported only when that command runs, so `highwater produce` does not
# pay for the admin, group and perf modules' imports, about 40% of a one-record `produce`'s time
# (docs/operations.md, "Start-up"). Each entry also carries the command's one-line summary, so
# `highwater --help` lists the commands without importing any of them (a unit test holds each
# summary to its command's own help).
class LazyCommand(NamedTuple):
    target: str  # "module:attribute"
    summary: str


LAZY_COMMANDS: dict[str, LazyCommand] = {
    "topics": LazyCommand("client.cli.topics:topics", "Create, list, describe and delete topics."),
    "produce": LazyCommand(
        "client.cli.produce:produce",
        "Produce one record per line of stdin to TOPIC; exit 1 if any record failed.",
    ),
    "consume": LazyCommand(
        "client.cli.consume:consume",
        "Print the records of TOPICS (all partitions unless --partition) to stdout; the "
        "summary goes to stderr.",
    ),
    "cluster": LazyCommand(
        "client.cli.topics:cluster",
        "Inspect the cluster (for a local cluster to develop with, see `highwater dev`).",
    ),
    "groups": LazyCommand(
        "client.cli.groups:groups",
        "Consumer groups: list, describe (lag), reset offsets, delete (kafka-consumer-groups).",
    ),
    "perf": LazyCommand(
        "client.cli.perf:perf",
        "Measure throughput and latency like Kafka's producer-perf and consumer-perf tools.",
    ),
    "dev": LazyCommand(
        "client.cli.dev:dev",
        "Run a local cluster (ZooKeeper + brokers on 127.0.0.1) for development.",
    ),
    "elect-leaders": LazyCommand(
        "client.cli.elect:elect_leaders", "Elect leaders now (Kafka's kafka-leader-election)."
    ),
    "reassign": LazyCommand(
        "client.cli.reassign:reassign",
        "Reassign partitions to other brokers (Kafka's kafka-reassign-partitions).",
    ),
    "configs": LazyCommand(
        "client.cli.configs:configs",
        "Describe and alter topic configs, the cluster-wide broker defaults and client quotas "
        "(--entity-type users|clients), live.",
    ),
    "users": LazyCommand(
        "client.cli.users:users",
        "Users' SCRAM credentials (stored salted in ZooKeeper, /config/users/<name>).",
    ),
    "acls": LazyCommand(
        "client.cli.acls:acls",
        "ACLs (Kafka's AclAuthorizer: checked when brokers set authorizer.class.name).",
    ),
}


class _Commands(click.Group):
    """Loads a command's module when it is asked for (LAZY_COMMANDS) and runs the command; an
    exception no command expected becomes one line, not a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = LAZY_COMMANDS.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        module_name, attribute = lazy.target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{lazy.target} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with the lazy commands' summaries from the table (no imports)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            lazy = LAZY_COMMANDS.get(name)
            if lazy is not None:
                # click shortens a summary to the width as it would the command's own help
                summary = click.Command(name, help=lazy.summary).get_short_help_str(limit)
                rows.append((name, summary))
            elif (command := super().get_command(ctx, name)) is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            raise _hinted(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:  # a command's, or a group's, own parsing
            raise _hinted(exc) from None
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


def _hinted(error: click.NoSuchOption) -> click.NoSuchOption:
    from client.cli.flag_hints import hinted  # only on this error: not for every command

    return hinted(error)


def _stop_writing_stdout() -> None:
    """The reader of our stdout went away (`| head`): what is left unwritten goes nowhere,
    so Python's flush of stdout at exit does not fail on the same broken pipe. The command
    ends quietly with status 0."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# -h as well as --help, for every command and group (kcat's and Kafka tools' habit).
@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
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

    from broker.config.broker_config import ConfigError, load_config
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


@main.command(
    "zookeeper-security-migration",
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def zookeeper_security_migration(args: tuple[str, ...]) -> None:
    """Set (secure) or remove (unsecure) the ACLs of the cluster's znodes in ZooKeeper."""
    from broker.zk_security_migration import main as migrate

    sys.exit(migrate(args, prog="highwater zookeeper-security-migration"))


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
