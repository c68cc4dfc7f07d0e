"""A generated section of a markdown doc, between two marker comments, and the command that
rewrites it or checks it is up to date (the settings tables of docs/operations.md and
docs/client-settings.md: broker/config/settings_doc.py, client/settings_doc.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DocSection"]


@dataclass(frozen=True, slots=True)
class DocSection:
    """`render()` belongs between `start` and `end` in `doc`; `command` regenerates it."""

    doc: Path
    start: str
    end: str
    render: Callable[[], str]
    command: str
    description: str

    def update(self, text: str) -> str:
        """`text` with the generated section between the markers."""
        before, start, rest = text.partition(self.start)
        _, end, after = rest.partition(self.end)
        if not start or not end:
            raise ValueError(f"the markers {self.start} and {self.end} are missing")
        return f"{before}{self.start}\n{self.render()}{self.end}{after}"

    def main(self, argv: list[str] | None = None) -> int:
        """Rewrite the doc; with --check, exit 1 if it is out of date (as the unit tests)."""
        parser = argparse.ArgumentParser(prog=self.command, description=self.description)
        parser.add_argument("--check", action="store_true", help="exit 1 if the doc is out of date")
        parser.add_argument("--file", type=Path, default=self.doc, help=f"default: {self.doc}")
        args = parser.parse_args(argv)
        text = args.file.read_text(encoding="utf-8")
        updated = self.update(text)
        if args.check:
            if updated != text:
                print(f"{args.file} is out of date: run `{self.command}`", file=sys.stderr)
                return 1
            return 0
        if updated != text:
            args.file.write_text(updated, encoding="utf-8")
            print(f"updated {args.file}")
        return 0
