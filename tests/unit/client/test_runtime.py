"""client.runtime tunes the garbage collector once per process (a fresh interpreter each)."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_start_up_is_frozen_and_young_collections_are_rarer() -> None:
    out = _run(
        "import gc\n"
        "from client.runtime import GC_YOUNG_THRESHOLD, tune_garbage_collector\n"
        "default = gc.get_threshold()\n"
        "tune_garbage_collector()\n"
        "young, *rest = gc.get_threshold()\n"
        "print(young == GC_YOUNG_THRESHOLD, tuple(rest) == default[1:], gc.get_freeze_count() > 0)"
    )
    assert out == "True True True"


def test_a_second_call_freezes_nothing_more() -> None:
    out = _run(
        "import gc\n"
        "from client.runtime import tune_garbage_collector\n"
        "tune_garbage_collector()\n"
        "frozen = gc.get_freeze_count()\n"
        "later = [[i] for i in range(10_000)]\n"
        "tune_garbage_collector()\n"
        "print(gc.get_freeze_count() == frozen)"
    )
    assert out == "True"


def test_a_client_command_runs_tuned() -> None:
    out = _run(
        "import gc\n"
        "from client.cli.common import run_client\n"
        "from client.runtime import GC_YOUNG_THRESHOLD\n"
        "async def ask():\n"
        "    return gc.get_threshold()[0]\n"
        "print(run_client('127.0.0.1:1', ask, timeout_s=5) == GC_YOUNG_THRESHOLD)"
    )
    assert out == "True"
