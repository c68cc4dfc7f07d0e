"""A command whose reader goes away (`highwater topics list | head -1`) ends quietly, status 0."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A command that writes far more than a pipe holds, from a trio task in a nursery (as the client
# commands do), so the BrokenPipeError arrives inside an exception group.
_FLOOD = """
import trio
from client.cli.main import main

@main.command("flood")
def flood() -> None:
    async def write() -> None:
        for _ in range(100_000):
            print("x" * 100)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)

    trio.run(run)

main(["flood"])
"""


@pytest.mark.parametrize("debug", ["", "1"])
def test_a_reader_that_goes_away_ends_the_command_quietly(debug: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    if debug:
        env["HIGHWATER_DEBUG"] = debug
    with subprocess.Popen(
        [sys.executable, "-c", _FLOOD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.readline() == b"x" * 100 + b"\n"
        child.stdout.close()  # as `head -1` exits
        errors = child.stderr.read().decode()
        status = child.wait(timeout=60)
    if debug:
        assert status != 0 and "BrokenPipeError" in errors  # the traceback, as asked
    else:
        assert (status, errors) == (0, "")
