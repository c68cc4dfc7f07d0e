"""Every command's --help: its own options first, the common ones (-b, --command-config)
last, just before -h/--help."""

from __future__ import annotations

from collections.abc import Iterator

import click

from client.cli.main import main
from tests.unit.cli.fakes import run


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def _option_lines(help_text: str) -> list[str]:
    """The first flag of each option line of the help's Options section (none for a command
    that hands its arguments to an argparse tool, as zookeeper-security-migration does)."""
    if "\nOptions:\n" not in help_text:
        return []
    section = help_text.split("\nOptions:\n", 1)[1]
    return [line.split()[0].rstrip(",") for line in section.splitlines() if line[2:3] == "-"]


def test_common_options_come_last_in_every_commands_help() -> None:
    checked = 0
    for path in _commands(main):
        result = run([*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        flags = _option_lines(result.stdout)
        if "--command-config" not in flags:
            continue  # not a client command (broker, dump-log, dev ...)
        assert flags[-3:] == ["-b", "--command-config", "-h"], (path, flags)
        checked += 1
    assert checked >= 25  # every client command (26 when written)
