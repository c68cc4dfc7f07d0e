"""Every apt install the Makefile runs adds what is missing and upgrades nothing it need not:
--no-upgrade, apt's upgrade-by-source-package off, and --no-install-recommends where the
package list without recommends was checked to be enough (README.md, "Set-up")."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGETS = (
    "zookeeper",
    "openssl",
    "nftables",
    "faketime",
    "kcat",
    "peer-servers",
    "containers",
    "browser",
)
WITHOUT_RECOMMENDS = {"zookeeper", "containers", "browser"}


def _installs(target: str) -> list[str]:
    """The `apt-get install` commands of one target, as make would run them."""
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), target],
        capture_output=True,
        text=True,
        check=True,
    )
    return re.findall(r"apt-get install [^;\n]*", done.stdout)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("target", TARGETS)
def test_apt_installs_upgrade_nothing_they_need_not(target: str) -> None:
    installs = _installs(target)
    assert installs, f"make {target} runs no apt-get install"
    for command in installs:
        words = command.split()
        assert "--no-upgrade" in words, command
        assert "APT::Get::Upgrade-By-Source-Package=false" in words, command
        assert ("--no-install-recommends" in words) is (target in WITHOUT_RECOMMENDS), command
