"""The CLI loads a command's module only when that command runs (client/cli/main.py)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from client.cli.main import LAZY_COMMANDS, main


def test_every_lazy_command_loads_under_its_own_name() -> None:
    ctx = click.Context(main)
    for name in LAZY_COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        assert command.name == name


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in [*LAZY_COMMANDS, "broker", "dump-log"]:
        assert f"  {name} " in result.output


@pytest.mark.parametrize("limit", [30, 60, 1_000])
def test_each_summary_in_the_table_is_its_commands_own(limit: int) -> None:
    ctx = click.Context(main)
    for name, lazy in LAZY_COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None
        summary = click.Command(name, help=lazy.summary).get_short_help_str(limit)
        assert summary == command.get_short_help_str(limit)


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["produc"])
    assert result.exit_code == 2
    assert "No such command 'produc'" in result.output


def _modules_loaded_by(args: list[str]) -> str:
    """The client modules a fresh interpreter (this one has them all) loads to run `args`."""
    probe = (
        "import sys\n"
        "from client.cli.main import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('client.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.splitlines()[-1]


def test_produce_does_not_import_the_other_commands_modules() -> None:
    loaded = _modules_loaded_by(["produce", "--help"])
    assert "'client.cli.produce'" in loaded
    for other in ("client.admin", "client.cli.groups", "client.cli.perf", "client.consumer"):
        assert f"'{other}'" not in loaded


def test_help_imports_no_command_module() -> None:
    assert _modules_loaded_by(["--help"]) == "['client.cli', 'client.cli.main']"


def test_an_admin_command_does_not_import_the_consumer() -> None:
    loaded = _modules_loaded_by(["topics", "list", "--help"])
    assert "'client.admin'" in loaded
    assert "'client.consumer.commits'" in loaded  # the group admin's, without the rest
    assert "'client.consumer.consumer'" not in loaded
