"""Partial network cuts: nftables rules inside one namespace of a `NetworkLab`.

`drop(lab, host, peer, port=..., direction=...)` adds a rule to a table of its own inside
`host`'s namespace that drops packets to (`OUT`) or from (`IN`) `peer`'s address, optionally
only those of one TCP port (either end: the peer's listener or ours). Only the named path is
cut: the namespace's link stays up and every other peer is reached as before. `heal(lab,
host)` deletes the table. `available()` says whether `nft` can be run here.
"""

from __future__ import annotations

import contextlib
import enum
import shutil
import subprocess

from tests.integration.netns import NetworkLab

__all__ = ["Direction", "available", "drop", "heal", "rules"]

TABLE = "highwater_cut"


class Direction(enum.Enum):
    OUT = "output"  # packets the host sends to the peer
    IN = "input"  # packets the host receives from the peer


def available() -> bool:
    return shutil.which("nft") is not None


def _nft(namespace: str, script: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", namespace, "nft", "-f", "-"],
        input=script.encode(),
        check=True,
        capture_output=True,
        timeout=10,
    )


def drop(
    lab: NetworkLab,
    host: int,
    peer: str,
    *,
    port: int | None = None,
    direction: Direction | None = None,
) -> None:
    """Drop packets between `host` and address `peer` (only TCP port `port` at the peer's or
    our end, if given), in `direction` (None: both ways)."""
    directions = [direction] if direction is not None else list(Direction)
    lines = [
        f"table inet {TABLE} {{",
        "  chain output { type filter hook output priority 0; policy accept; }",
        "  chain input { type filter hook input priority 0; policy accept; }",
        "}",
    ]
    for d in directions:
        address = "daddr" if d is Direction.OUT else "saddr"
        if port is None:
            lines.append(f"add rule inet {TABLE} {d.value} ip {address} {peer} drop")
        else:
            # The peer's listener (dport out, sport in) or ours (the other way round).
            for end in ("dport", "sport"):
                lines.append(
                    f"add rule inet {TABLE} {d.value} ip {address} {peer} tcp {end} {port} drop"
                )
    _nft(lab.namespace(host), "\n".join(lines) + "\n")


def heal(lab: NetworkLab, host: int) -> None:
    """Remove every rule `drop` added in `host`'s namespace (nothing if there were none)."""
    with contextlib.suppress(subprocess.CalledProcessError):
        _nft(lab.namespace(host), f"delete table inet {TABLE}\n")


def rules(lab: NetworkLab, host: int) -> str:
    """The namespace's ruleset, for a failure message."""
    done = subprocess.run(
        ["ip", "netns", "exec", lab.namespace(host), "nft", "list", "ruleset"],
        capture_output=True,
        timeout=10,
    )
    return done.stdout.decode(errors="replace")
