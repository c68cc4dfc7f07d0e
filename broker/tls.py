"""TLS for a broker's SSL and SASL_SSL listeners, and the client side it uses towards other
brokers: contexts from PEM files (`ssl.keystore.location`, `ssl.truststore.location`), TLS 1.2
or later only, and the principal a client certificate names (Kafka's default principal
builder: `User:` and the subject's RFC 2253 distinguished name)."""

from __future__ import annotations

import ssl
from typing import Any, Final

from broker.config.broker_config import BrokerConfig

__all__ = ["certificate_subject", "https_context", "server_context"]

_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH: Final = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
# RFC 4514's short names for the attributes Python's getpeercert() spells out.
_SHORT_NAMES: Final = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """The context of every TLS listener of this broker. OSError or ssl.SSLError (a missing
    file, a wrong key password) at start-up, where the caller names the setting."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _limit_versions(context, config.ssl_enabled_protocols)
    assert config.ssl_keystore_location is not None
    context.load_cert_chain(config.ssl_keystore_location, password=config.ssl_key_password)
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        if config.ssl_truststore_location:
            context.load_verify_locations(cafile=config.ssl_truststore_location)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def https_context(config: BrokerConfig) -> ssl.SSLContext:
    """The context of an https:// `metrics.listener`: the broker's certificate and TLS
    versions; no client certificate asked for (HTTP basic authentication says who asks)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _limit_versions(context, config.ssl_enabled_protocols)
    assert config.ssl_keystore_location is not None
    context.load_cert_chain(config.ssl_keystore_location, password=config.ssl_key_password)
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


def _limit_versions(context: ssl.SSLContext, versions: tuple[str, ...]) -> None:
    chosen = sorted(_VERSIONS[v] for v in versions)
    context.minimum_version = chosen[0]
    context.maximum_version = chosen[-1]


def certificate_subject(certificate: dict[str, Any] | None) -> str | None:
    """The subject of a peer certificate (as `SSLObject.getpeercert()` returns it) in RFC 2253
    form, most specific first (`CN=alice,O=example`), as Java's X500Principal.getName()."""
    if not certificate or "subject" not in certificate:
        return None
    parts = []
    for rdn in reversed(certificate["subject"]):
        parts.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in ',+"\\<>;=' else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped
