"""How long a broker stopped and started with podman-compose takes to pass its health check,
with the network's bridge address left to the kernel, then fixed (docs/operations.md,
"podman-compose specifics").

Run (root, podman as `make containers` sets it up; not while `make up`'s cluster or the compose
test runs, as the published ports are the same):
`.venv/bin/python -m tests.compose.restart_rounds [--rounds 8] [--project hwrestart]`.
Figures, not a pass/fail check.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from tests.compose.harness import BROKERS, ComposeProject, find_podman_compose
from tests.compose.images import ensure_images

_HEALTHY_S = 120
_STEP_S = 120


def _bridge_address(bridge: str) -> str:
    return Path(f"/sys/class/net/{bridge}/address").read_text().strip()


def _rounds(project: ComposeProject, bridge: str, label: str, count: int) -> list[float]:
    seconds = []
    for number in range(count):
        before = _bridge_address(bridge)
        project.compose("stop", "broker-1", timeout_s=_STEP_S)
        project.compose("start", "broker-1", timeout_s=_STEP_S)
        started = time.monotonic()
        project.wait_healthy(["broker-1"], _HEALTHY_S)
        seconds.append(time.monotonic() - started)
        after = _bridge_address(bridge)
        moved = "changed" if after != before else "same"
        print(
            f"{label} round {number + 1}: bridge address {moved}, healthy in {seconds[-1]:.1f} s",
            flush=True,
        )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--project", default="hwrestart")
    args = parser.parse_args()
    podman_compose = find_podman_compose()
    if podman_compose is None:
        raise SystemExit("podman-compose is not installed (the dev extra pins it)")
    ensure_images(log=lambda line: print(line, flush=True))
    project = ComposeProject(args.project, podman_compose)
    project.destroy()
    try:
        project.compose("up", "-d", timeout_s=_STEP_S)
        project.wait_healthy(["zookeeper", *BROKERS], _HEALTHY_S)
        network = json.loads(project.podman("network", "inspect", f"{args.project}_default").stdout)
        bridge = str(network[0]["network_interface"])
        results = {"kernel's address": _rounds(project, bridge, "kernel's", args.rounds)}
        # An address set by hand is kept: the bridge no longer follows its ports' addresses.
        subprocess.run(
            ["ip", "link", "set", bridge, "address", _bridge_address(bridge)],
            check=True,
            timeout=10,
        )
        results["fixed address"] = _rounds(project, bridge, "fixed", args.rounds)
    finally:
        project.destroy()
    for label, seconds in results.items():
        print(
            f"{label}: healthy in {min(seconds):.1f}-{max(seconds):.1f} s, "
            f"median {statistics.median(seconds):.1f} s, over {len(seconds)} restarts"
        )


if __name__ == "__main__":
    main()
