"""The client properties file `highwater users add NAME --write-client-properties FILE` writes:
the connection settings of the --command-config it ran with (security.protocol,
sasl.mechanism, ssl.truststore.location, hostname checking) and NAME's own SASL login, for
NAME's --command-config. Java .properties escaping, so any password reads back as it was."""

from __future__ import annotations

from client.security import ClientSecurity

__all__ = ["escape_property", "user_client_properties"]

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}


def escape_property(value: str, *, key: bool = False) -> str:
    """As java.util.Properties.store: backslashes, line breaks, '=', ':', '#', '!' escaped,
    and a leading space (every space, in a key)."""
    out = []
    for index, char in enumerate(value):
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char in "=:#!" or (char == " " and (key or index == 0)):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def user_client_properties(
    security: ClientSecurity, name: str, password: str, mechanisms: tuple[str, ...]
) -> str:
    """`security`'s connection settings with NAME's login. The mechanism stays the admin's if
    NAME has credentials for it (`mechanisms`), else it is NAME's first."""
    mechanism = security.sasl_mechanism
    if mechanism not in mechanisms:
        mechanism = mechanisms[0]
    lines = [
        f"# Written by `highwater users add {name}`: user {name}'s client properties.",
        f"security.protocol={security.protocol}",
        f"sasl.mechanism={mechanism}",
        f"sasl.username={escape_property(name)}",
        f"sasl.password={escape_property(password)}",
    ]
    if security.ssl_cafile is not None:
        lines.append(f"ssl.truststore.location={escape_property(security.ssl_cafile)}")
    if security.uses_tls and not security.check_hostname:
        lines.append("ssl.endpoint.identification.algorithm=")
    return "\n".join(lines) + "\n"
