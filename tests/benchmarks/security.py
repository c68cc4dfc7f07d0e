"""Security benchmark: SASL_SSL against PLAINTEXT, and SCRAM connection set-up
(docs/operations.md, "Benchmark", "Security").

Run: `make bench-security` (or `.venv/bin/python -m tests.benchmarks.security`).
Starts two local clusters in temporary directories, one after the other (3 brokers each):
`highwater dev up` (PLAINTEXT) and `highwater dev up --secure` (SASL_SSL client listener,
SCRAM, ACLs on; the admin user, a super user, is the client). Runs alternate between them,
`--runs` each: `perf produce` (RF=3, min.insync.replicas=2, acks=all, 100-byte records) and
`perf consume` of the same records; then prints the medians and the ratios secure / plain
(the issue's aim: >= 0.7). Connection set-up: `--connects` connections (TCP, TLS handshake,
SCRAM-SHA-512 and SCRAM-SHA-256 exchanges) to the secured cluster, p50/p99, and PLAINTEXT's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from client.cli.local_security import admin_security
from client.network import connect
from client.security import ClientSecurity

AIM = 0.7


def highwater(*args: str, bootstrap: str, config: Path | None = None) -> str:
    env = {**os.environ, "HIGHWATER_BOOTSTRAP": bootstrap}
    env.pop("HIGHWATER_COMMAND_CONFIG", None)
    if config is not None:
        env["HIGHWATER_COMMAND_CONFIG"] = str(config)
    command = [sys.executable, "-m", "client.cli", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _records_per_s(line: str, field: int) -> float:
    return float(line.split(",")[field].strip().split()[0])


def run_round(bootstrap: str, config: Path | None, topic: str, records: int) -> tuple[float, float]:
    """(produce records/s, consume records/s) of one round on a fresh topic."""
    highwater(
        "topics", "create", topic, "--partitions", "1", "--replication-factor", "3",
        "--config", "min.insync.replicas=2", bootstrap=bootstrap, config=config,
    )  # fmt: skip
    produced = highwater(
        "perf", "produce", "--topic", topic, "--num-records", str(records), "--acks", "all",
        bootstrap=bootstrap, config=config,
    )  # fmt: skip
    summary = next(line for line in produced.splitlines() if "records sent" in line)
    produce_rate = float(summary.split(",")[1].split()[0])
    consumed = highwater(
        "perf", "consume", "--topic", topic, "--messages", str(records),
        bootstrap=bootstrap, config=config,
    )  # fmt: skip
    csv = next(line for line in consumed.splitlines() if line[:1].isdigit())
    consume_rate = float(csv.split(",")[5])
    return produce_rate, consume_rate


async def connect_times_ms(port: int, security: ClientSecurity | None, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        conn = await connect("127.0.0.1", port, security=security)
        times.append((time.perf_counter() - start) * 1000)
        await conn.aclose()
    return times


def _percentiles(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connects", type=int, default=200)
    parser.add_argument("--base-port", type=int, default=19192)
    parser.add_argument("--zk-port", type=int, default=32281)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-bench-security-") as root:
        plain_dir, secure_dir = Path(root) / "plain", Path(root) / "secure"
        plain = f"127.0.0.1:{args.base_port}"
        secure = f"127.0.0.1:{args.base_port + 10}"
        config = secure_dir / "client.properties"
        rates: dict[str, list[tuple[float, float]]] = {"plain": [], "secure": []}
        for run in range(args.runs):
            for name, directory, bootstrap, extra in (
                ("plain", plain_dir, plain, []),
                ("secure", secure_dir, secure, ["--secure"]),
            ):
                port = args.base_port + (10 if name == "secure" else 0)
                highwater(
                    "dev", "up", "--dir", str(directory), "--base-port", str(port),
                    "--zk-port", str(args.zk_port), *extra, bootstrap=bootstrap,
                )  # fmt: skip
                try:
                    result = run_round(
                        bootstrap,
                        config if name == "secure" else None,
                        f"bench-{run}",
                        args.records,
                    )
                    rates[name].append(result)
                    produce, consume = result
                    print(f"run {run + 1} {name}: produce {produce:.0f}/s, consume {consume:.0f}/s")
                    if name == "secure" and run == 0:
                        security = admin_security(directory)
                        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                            chosen = ClientSecurity(
                                protocol="SASL_SSL",
                                sasl_mechanism=mechanism,
                                username=security.username,
                                password=security.password,
                                ssl_cafile=security.ssl_cafile,
                            )
                            times = trio.run(connect_times_ms, port, chosen, args.connects)
                            print(f"connection set-up, SASL_SSL {mechanism}: {_percentiles(times)}")
                    if name == "plain" and run == 0:
                        times = trio.run(connect_times_ms, port, None, args.connects)
                        print(f"connection set-up, PLAINTEXT: {_percentiles(times)}")
                finally:
                    highwater("dev", "down", "--dir", str(directory), bootstrap=bootstrap)
        print(f"3 brokers, RF=3, min.insync.replicas=2, acks=all, {args.records} x 100 bytes")
        for index, what in enumerate(("produce", "consume")):
            plain_median = statistics.median(r[index] for r in rates["plain"])
            secure_median = statistics.median(r[index] for r in rates["secure"])
            ratio = secure_median / plain_median
            verdict = "ok" if ratio >= AIM else "BELOW the aim"
            print(
                f"{what}: PLAINTEXT {plain_median:.0f}/s, SASL_SSL {secure_median:.0f}/s, "
                f"ratio {ratio:.2f} (aim {AIM}: {verdict})"
            )


if __name__ == "__main__":
    main()
