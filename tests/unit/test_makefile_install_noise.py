"""`make up`'s install of this project is quiet: setuptools' two known notices (the
"experimental" ext-modules table, the editable-install banner) are filtered by their exact
text, and any other warning still shows. The filter is the one in the Makefile's recipe,
applied to the messages setuptools emits (as a BuildBackendWarning, a UserWarning)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTICES = (
    "`[tool.setuptools.ext-modules]` in `pyproject.toml` is still *experimental* and likely to "
    "change in future releases.",
    "Editable installation.\n!!\n\n    Please be careful with folders in your working directory",
)
OTHER = "a warning nobody filtered"


def _install_commands() -> list[str]:
    """The recipe lines that install this project, as make would run them."""
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), ".venv/.installed-bench"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if " -c constraints.txt -e " in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_every_install_of_the_project_silences_setuptools_notices_only() -> None:
    commands = _install_commands()
    assert len(commands) == 3  # base, dev+spark, bench
    for command in commands:
        words = shlex.split(command)
        settings = dict(w.split("=", 1) for w in words if re.match(r"[A-Z_]+=", w))
        assert "PYTHONWARNINGS" in settings, command
        script = "import warnings\n" + "".join(
            f"warnings.warn({text!r}, UserWarning)\n" for text in (*NOTICES, OTHER)
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONWARNINGS": settings["PYTHONWARNINGS"]},
            capture_output=True,
            text=True,
            check=True,
        )
        assert "experimental" not in done.stderr
        assert "Editable installation" not in done.stderr
        assert OTHER in done.stderr
