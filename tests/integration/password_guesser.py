"""Guess a user's PLAIN password from `--clients` connections at once, over and over, until
killed: one line per answer ("<error code> <seconds>", or "accepted"). A process of its own, so
that its TLS handshakes do not slow the measuring test's event loop.

Run: python -m tests.integration.password_guesser PORT CAFILE USER [--clients 8]
"""

from __future__ import annotations

import argparse
from functools import partial

import trio

from client.network import AuthenticationFailedError, connect
from client.security import ClientSecurity


async def _guess(port: int, security: ClientSecurity) -> None:
    while True:
        started = trio.current_time()
        try:
            conn = await connect("127.0.0.1", port, security=security)
        except AuthenticationFailedError as exc:
            print(f"{int(exc.code)} {trio.current_time() - started:.4f}", flush=True)
        else:
            await conn.aclose()
            print("accepted", flush=True)


async def _flood(port: int, security: ClientSecurity, clients: int) -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(_guess, port, security)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("cafile")
    parser.add_argument("user")
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    security = ClientSecurity(
        protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        username=args.user,
        password="not-the-password",
        ssl_cafile=args.cafile,
    )
    trio.run(partial(_flood, args.port, security, args.clients))


if __name__ == "__main__":
    main()
