"""How often each broker wakes per Produce, and the CPU each wake costs, during `highwater perf
end-to-end` at 10,000 records/s (docs/performance.md, "Why a request costs more in a broker
than in a loop").

Against a running `highwater dev up` cluster and an existing topic:

    python -m tests.benchmarks.wakes --topic e2e [--linger-ms 0 5] [--runs 2] [--dir .local-cluster]

For each run it reads, before and after, each broker's user and system CPU and its
`voluntary_ctxt_switches` (/proc: how often it blocked waiting for the network) and the
cluster's Produce and Fetch request counts (each broker's /metrics), then prints per broker:
cores (user + system), requests a second, wakes per Produce and CPU per wake.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from client.cli.local_cluster import DEFAULT_DIR, load_layout
from tests.benchmarks.proc_cpu import broker_pids, user_system_seconds

_WAKES = re.compile(r"^voluntary_ctxt_switches:\s+(\d+)$", re.M)


@dataclass(frozen=True)
class Sample:
    """One broker at one moment."""

    user_s: float
    system_s: float
    wakes: int
    requests: dict[str, float]  # API name -> requests served so far


def request_counts(metrics_text: str) -> dict[str, float]:
    """API name -> highwater_network_requests_total from a /metrics page."""
    return {
        sample.labels["request"]: sample.value
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "highwater_network_requests_total"
    }


def sample(pid: int, metrics_url: str) -> Sample:
    user_s, system_s = user_system_seconds(pid)
    status = Path(f"/proc/{pid}/status").read_text()
    match = _WAKES.search(status)
    with urllib.request.urlopen(metrics_url, timeout=5) as page:
        text = page.read().decode()
    return Sample(
        user_s,
        system_s,
        int(match.group(1)) if match else 0,
        request_counts(text),
    )


def report_line(broker: int, before: Sample, after: Sample, wall_s: float, produces: float) -> str:
    """One broker's figures over a run; `produces`: the cluster's Produce requests in it."""
    user = after.user_s - before.user_s
    system = after.system_s - before.system_s
    wakes = after.wakes - before.wakes

    def rate(api: str) -> float:
        return (after.requests.get(api, 0.0) - before.requests.get(api, 0.0)) / wall_s

    per_produce = wakes / produces if produces else 0.0
    per_wake_us = (user + system) / wakes * 1e6 if wakes else 0.0
    return (
        f"  broker {broker}: {(user + system) / wall_s:.3f} cores (user {user / wall_s:.3f}, "
        f"system {system / wall_s:.3f}), Produce {rate('Produce'):.0f}/s, "
        f"Fetch {rate('Fetch'):.0f}/s, {per_produce:.2f} wakes per Produce, "
        f"{per_wake_us:.0f} us of CPU per wake"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", default="e2e")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the dev cluster's directory")
    parser.add_argument("--linger-ms", type=int, nargs="+", default=[0, 5])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--num-records", type=int, default=100_000)
    args = parser.parse_args()
    layout = load_layout(args.dir.resolve())
    if layout is None:
        sys.exit(f"no cluster in {args.dir}: start one with `highwater dev up`")
    pids = broker_pids(layout.root)
    urls = {b: f"http://127.0.0.1:{layout.metrics_port(b)}/metrics" for b in pids}
    tool = str(Path(sys.executable).with_name("highwater"))
    for run in range(1, args.runs + 1):
        for linger_ms in args.linger_ms:
            before = {b: sample(pid, urls[b]) for b, pid in pids.items()}
            started = time.monotonic()
            command = [tool, "perf", "end-to-end", "-b", layout.bootstrap, "--topic", args.topic]
            command += ["--num-records", str(args.num_records), "--linger-ms", str(linger_ms)]
            result = subprocess.run(command, capture_output=True, text=True, check=True)
            wall_s = time.monotonic() - started
            after = {b: sample(pid, urls[b]) for b, pid in pids.items()}
            produces = sum(
                after[b].requests.get("Produce", 0.0) - before[b].requests.get("Produce", 0.0)
                for b in pids
            )
            print(f"run {run}, linger.ms {linger_ms}: {result.stdout.strip().splitlines()[-1]}")
            for b in sorted(pids):
                print(report_line(b, before[b], after[b], wall_s, produces))


if __name__ == "__main__":
    main()
