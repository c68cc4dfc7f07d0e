"""What kcat's and Kafka tools' flags are called here, for click's "No such option" error.

click suggests near spellings of the command's own options (`--lst`: `--list`), but a kcat or
Kafka-tools user types flags that are spelt differently here (`-G` for --group,
`kafka-topics --describe` for the `describe` subcommand). `hinted` adds what to type instead.
"""

from __future__ import annotations

import click

__all__ = ["hinted"]

# Their flag -> our option: suggested where the command has that option.
_SAME_AS: dict[str, str] = {
    "-G": "--group",  # kcat -G GROUP
    "-F": "--command-config",  # kcat -F FILE
    "--broker-list": "--bootstrap-server",  # the old console producer's
    "--consumer.config": "--command-config",  # kafka-console-consumer's
    "--producer.config": "--command-config",  # kafka-console-producer's
    "--num-messages": "--max-messages",
}

# Their flag -> what to do instead: said where the command has the option named second
# (None: wherever the flag is typed).
_NOTES: dict[str, tuple[str, str | None]] = {
    "-C": ("kcat's -C (consumer mode) is `highwater consume`", None),
    "-P": ("kcat's -P (producer mode) is `highwater produce`", None),
    "-L": ("kcat's -L (metadata) is `highwater cluster describe` and `topics describe`", None),
    "-Q": ("kcat's -Q (offsets for times) is `highwater consume TOPIC -o s@TIME`", None),
    "-l": ("Records come from stdin: `highwater produce TOPIC < FILE`", None),
    "-K": ("Keys are printed with --format, e.g. --format '%k\\t%s\\n'", "--format"),
    "--property": ("print.key=true is --format '%k\\t%s\\n' here (kcat's tokens)", "--format"),
}


def hinted(error: click.NoSuchOption) -> click.NoSuchOption:
    """The error with what to type instead, if we know it; else the error itself."""
    ctx = error.ctx
    hint = None if ctx is None else _hint(error.option_name.split("=", 1)[0], ctx)
    if hint is None:
        return error
    return click.NoSuchOption(
        error.option_name, message=f"No such option {error.option_name!r}. {hint}", ctx=ctx
    )


def _hint(name: str, ctx: click.Context) -> str | None:
    command = ctx.command
    if (
        isinstance(command, click.Group)
        and name.startswith("--")
        and name[2:] in command.list_commands(ctx)
    ):
        return f"Did you mean `{ctx.command_path} {name[2:]}`?"  # kafka-topics --describe
    ours = _SAME_AS.get(name)
    if ours is not None and _has_option(ctx, ours):
        return f"Did you mean {ours}?"
    if name == "--group" and any(
        isinstance(p, click.Argument) and p.human_readable_name.startswith("GROUP")
        for p in command.params
    ):
        return f"GROUP is an argument here: `{ctx.command_path} GROUP`."
    note, needs = _NOTES.get(name, (None, None))
    if note is None or (needs is not None and not _has_option(ctx, needs)):
        return None
    return f"{note}."


def _has_option(ctx: click.Context, name: str) -> bool:
    return any(
        name in p.opts or name in p.secondary_opts
        for p in ctx.command.get_params(ctx)
        if isinstance(p, click.Option)
    )
