"""What every client command of the CLI shares: `-b/--bootstrap-server` and readable errors.

Client commands run the async client library under `trio.run` (`run_client`). Expected
failures (a broker error, no broker reachable, a timeout, a bad input) become one line on
stderr and a non-zero exit, never a traceback; `check_topics` makes the first of them fail
fast, once, before any input is read. Unexpected errors: see main.py (HIGHWATER_DEBUG).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import trio

from client.cli.refusals import Attempt, principal_of, refusal_line
from client.errors import (
    HighwaterClientError,
    HighwaterTimeoutError,
    NoBrokersAvailable,
    UnknownTopicError,
)
from client.lifecycle import exception_leaves
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.runtime import tune_garbage_collector
from client.security import ClientSecurity
from protocol.errors import ErrorCode

__all__ = [
    "BOOTSTRAP_ENV",
    "COMMAND_CONFIG_ENV",
    "DEFAULT_BOOTSTRAP",
    "admin_settings",
    "bootstrap_option",
    "check_topics",
    "cli_security",
    "exception_leaves",
    "fail",
    "parse_bootstrap",
    "readable_client_errors",
    "run_client",
]

BOOTSTRAP_ENV = "HIGHWATER_BOOTSTRAP"
COMMAND_CONFIG_ENV = "HIGHWATER_COMMAND_CONFIG"
_SECURITY_KEY = "highwater.security"
_ADMIN_KEY = "highwater.admin"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]+):(?P<port>\d{1,5})$")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` as (host, port) pairs; ValueError names the bad entry."""
    servers = []
    for entry in (e.strip() for e in text.split(",")):
        match = _HOST_PORT.match(entry)
        port = int(match["port"]) if match else 0
        if match is None or not 0 < port < 65536:
            raise ValueError(f"{entry!r} is not HOST:PORT")
        servers.append((match["host"].strip("[]"), port))
    return servers


def _check_bootstrap(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        parse_bootstrap(value)
    except ValueError as exc:
        raise click.BadParameter(f"{exc} (expected HOST:PORT[,HOST:PORT...])") from exc
    return value


def bootstrap_option(func: F) -> F:
    """-b/--bootstrap-server, and --command-config FILE: how to secure the connections."""
    option = click.option(
        "-b",
        "--bootstrap-server",
        "bootstrap",
        envvar=BOOTSTRAP_ENV,
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        show_envvar=True,
        callback=_check_bootstrap,
        metavar="HOST:PORT[,...]",
        help="Brokers to bootstrap from.",
    )
    config = click.option(
        "--command-config",
        "command_config",
        envvar=COMMAND_CONFIG_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_load_command_config,
        metavar="FILE",
        help="Client properties (Kafka's names: security.protocol, sasl.mechanism, "
        "sasl.username, sasl.password or sasl.jaas.config, ssl.truststore.location, ...; "
        "for admin commands also request.timeout.ms, retry.backoff.ms, client.id).",
    )
    decorated = config(option(func))
    # Listed last in --help, after the command's own options: click lists parameters in the
    # reverse order of their decorators' application, this one's being the list's last two.
    params = getattr(decorated, "__click_params__", [])
    params[:] = [*params[-1:], *params[-2:-1], *params[:-2]]
    return decorated


def _load_command_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if not value:
        return
    # properties.py imports this module
    from client.cli.properties import ADMIN_PROPERTIES, parse_properties, read_properties_file

    try:
        properties = read_properties_file(Path(value))
        security = ClientSecurity.from_properties(properties)
        admin = parse_properties(
            (f"{k}={v}" for k, v in properties.items() if k in ADMIN_PROPERTIES),
            ADMIN_PROPERTIES,
            "admin",
        )
    except (OSError, ValueError) as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    ctx.meta[_SECURITY_KEY] = security
    ctx.meta[_ADMIN_KEY] = admin


def cli_security() -> ClientSecurity | None:
    """The security of this command's connections (--command-config), None: PLAINTEXT."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_SECURITY_KEY)


def admin_settings() -> dict[str, Any]:
    """client.admin.Admin's keyword arguments for this command: --command-config's security
    and admin settings (request.timeout.ms, retry.backoff.ms, client.id, by default
    "highwater-cli"), as Kafka's tools give that file to their AdminClient."""
    ctx = click.get_current_context(silent=True)
    settings: dict[str, Any] = {"client_id": "highwater-cli", "security": cli_security()}
    if ctx is not None:
        settings.update(ctx.meta.get(_ADMIN_KEY, {}))
    return settings


class _ExitError(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it a class attribute


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Print `Error: message` on stderr and exit."""
    raise _ExitError(message, exit_code)


_USER_ERRORS = (HighwaterClientError, BrokerConnectionError, trio.TooSlowError, OSError)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return "timed out waiting for the cluster"
    return str(exc) or type(exc).__name__


@contextmanager
def readable_client_errors(
    bootstrap: str | None = None, attempt: Attempt | None = None
) -> Iterator[None]:
    """Turn the client library's expected failures (also inside exception groups) into one line;
    an authorization refusal of `attempt` into who may not do what and the grant that fixes it
    (client/cli/refusals.py)."""
    try:
        yield
    except BaseException as exc:
        leaves = list(exception_leaves(exc))
        for leaf in leaves:
            if isinstance(leaf, BrokenPipeError):
                raise leaf from None  # the reader of our stdout went away: the caller decides
        if not leaves or not all(isinstance(leaf, _USER_ERRORS) for leaf in leaves):
            raise
        if attempt is not None:
            principal = principal_of(cli_security())
            for leaf in leaves:
                if isinstance(leaf, HighwaterClientError):
                    line = refusal_line(leaf, principal, attempt)
                    if line is not None:
                        fail(line)
        first = leaves[0]
        unreachable = not isinstance(first, HighwaterClientError) or isinstance(
            first, NoBrokersAvailable | HighwaterTimeoutError
        )
        where = f" (bootstrap {bootstrap})" if bootstrap and unreachable else ""
        fail(_describe(first) + where)


async def check_topics(
    metadata: ClusterMetadata, topics: list[str], timeout_ms: float
) -> dict[str, tuple[int, ...]]:
    """Each topic's partitions, after one Metadata round: NoBrokersAvailable at once if no
    bootstrap broker answers, UnknownTopicError if a topic does not exist (topics are not
    created automatically); a topic still being created (LEADER_NOT_AVAILABLE) is waited for,
    at most timeout_ms. The topics stay in the metadata's interest."""
    metadata.add_topics(topics)
    await metadata.refresh()
    found = {}
    for topic in topics:
        if metadata.topic_error(topic) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise UnknownTopicError(
                f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic!r} does not exist "
                "(create it with `highwater topics create`)"
            )
        found[topic] = await metadata.wait_for_topic(topic, timeout_ms)
    return found


def run_client(
    bootstrap: str,
    async_fn: Callable[..., Awaitable[T]],
    *args: Any,
    timeout_s: float | None,
    on_interrupt: Callable[[], None] | None = None,
    attempt: Attempt | None = None,
) -> T:
    """trio.run(async_fn, *args), bounded by timeout_s, with readable errors (`attempt`: what
    the command attempts, to explain an authorization refusal).

    Ctrl-C calls on_interrupt (if given) and exits with status 130. The garbage collector is
    tuned for the rest of the process, as a broker's (client.runtime).
    """

    async def bounded() -> T:
        if timeout_s is None:
            return await async_fn(*args)
        with trio.fail_after(timeout_s):
            return await async_fn(*args)

    tune_garbage_collector()
    with readable_client_errors(bootstrap, attempt):
        try:
            return trio.run(bounded)
        except BaseException as exc:
            if not any(isinstance(leaf, KeyboardInterrupt) for leaf in exception_leaves(exc)):
                raise
            if on_interrupt is not None:
                on_interrupt()
            else:
                click.echo("interrupted", err=True)
            sys.exit(130)
