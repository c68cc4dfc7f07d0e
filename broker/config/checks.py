"""The broker's checks across settings, made at start-up (the settings table checks each one
alone): listeners and their wires, the inter-broker and control-plane listeners, TLS and SASL,
ZooKeeper's login, the metrics listener's exposure. Each failure names the setting to fix."""

from __future__ import annotations

from typing import Any, Protocol

from broker.config.config_def import is_loopback, metrics_listener_uses_tls, parse_metrics_listener
from broker.listeners import Listener, SecurityProtocol

__all__ = [
    "Given",
    "check_metrics_listener",
    "check_security",
    "check_zookeeper_login",
    "control_plane_listener",
    "inter_broker_listener",
    "only_plaintext",
]


class Given(Protocol):
    """The settings as given (broker.config.broker_config's loader)."""

    def is_set(self, key: str) -> bool: ...

    def text(self, key: str) -> str: ...

    def fail(self, key: str, expected: str) -> Exception: ...


def only_plaintext(listeners: tuple[Listener, ...]) -> bool:
    return len(listeners) == 1 and (listeners[0].name, listeners[0].security_protocol) == (
        SecurityProtocol.PLAINTEXT.value,
        SecurityProtocol.PLAINTEXT,
    )


def inter_broker_listener(given: Given, listeners: tuple[Listener, ...]) -> Listener:
    """inter.broker.listener.name, else the listener named by security.inter.broker.protocol
    (Kafka's rule; setting both is an error there too)."""
    names = ", ".join(x.name for x in listeners)
    if given.is_set("inter.broker.listener.name"):
        if given.is_set("security.inter.broker.protocol"):
            raise given.fail(
                "security.inter.broker.protocol",
                "no value when inter.broker.listener.name is set (set only one of them)",
            )
        key, name = "inter.broker.listener.name", given.text("inter.broker.listener.name").upper()
    else:
        key, name = "security.inter.broker.protocol", given.text("security.inter.broker.protocol")
    for listener in listeners:
        if listener.name == name:
            if listener.wire != "highwater":
                raise given.fail(
                    "listener.wire.protocol.map",
                    f"highwater for the inter-broker listener {name} (brokers speak it)",
                )
            return listener
    hint = "" if key == "inter.broker.listener.name" else " (or set inter.broker.listener.name)"
    raise given.fail(key, f"the name of one of the listeners ({names}){hint}")


def check_zookeeper_login(given: Given, values: dict[str, Any]) -> None:
    """A digest login needs both halves; ACLs need a login (Kafka refuses zookeeper.set.acl
    without a SASL or TLS identity too: CREATOR_ALL would have no creator)."""
    user, password = values["zookeeper_digest_username"], values["zookeeper_digest_password"]
    if (user is None) != (password is None):
        missing = "zookeeper.digest.password" if password is None else "zookeeper.digest.username"
        raise given.fail(missing, "set together with the other half of the ZooKeeper login")
    if user is not None and (not user or ":" in user):
        raise given.fail("zookeeper.digest.username", "a non-empty name without ':'")
    if values["zookeeper_set_acl"] and user is None:
        raise given.fail(
            "zookeeper.digest.username",
            "the brokers' ZooKeeper login when zookeeper.set.acl is true",
        )


def control_plane_listener(
    given: Given, listeners: tuple[Listener, ...], inter_broker: Listener
) -> str | None:
    """control.plane.listener.name: one of the listeners, speaking highwater, not the
    inter-broker one (Kafka's rules, KIP-291)."""
    key = "control.plane.listener.name"
    if not given.is_set(key):
        return None
    name = given.text(key).upper()
    names = ", ".join(x.name for x in listeners if x.name != inter_broker.name)
    for listener in listeners:
        if listener.name == name and name != inter_broker.name:
            if listener.wire != "highwater":
                raise given.fail(
                    "listener.wire.protocol.map",
                    f"highwater for the control-plane listener {name} (brokers speak it)",
                )
            return name
    raise given.fail(key, f"the name of a listener other than the inter-broker one ({names})")


def check_metrics_listener(given: Given, values: dict[str, Any]) -> None:
    """An https:// listener needs the broker's certificate; with an authorizer, a listener that
    others can reach must authenticate (it would show every topic and group to anyone), and a
    password is never sent in clear beyond this host."""
    text = values["metrics_listener"]
    if not text:
        return
    tls = metrics_listener_uses_tls(text)
    if tls and not values["ssl_keystore_location"]:
        raise given.fail(
            "ssl.keystore.location",
            "a PEM file with the certificate and key for the https:// metrics.listener",
        )
    host, _ = parse_metrics_listener(text)
    if is_loopback(host):
        return
    basic = values["metrics_listener_authentication_method"] == "basic"
    if basic and not tls:
        raise given.fail(
            "metrics.listener",
            "https:// on an address other than loopback when "
            "metrics.listener.authentication.method=basic (passwords are never sent in clear)",
        )
    open_to_all = not basic and not values["metrics_listener_allow_unauthenticated"]
    if values["authorizer_enabled"] and open_to_all:
        raise given.fail(
            "metrics.listener",
            "a loopback address (127.0.0.1, ::1, localhost) with authorizer.class.name set, "
            "unless metrics.listener.authentication.method=basic, or "
            "metrics.listener.allow.unauthenticated=true to serve every topic and group "
            "to anyone who can reach it",
        )


def check_security(
    given: Given, listeners: tuple[Listener, ...], inter_broker: Listener, values: dict[str, Any]
) -> None:
    """What TLS and SASL listeners need, checked at start-up rather than at the first client."""
    tls = [x.name for x in listeners if x.security_protocol.uses_tls]
    if tls and not values["ssl_keystore_location"]:
        raise given.fail(
            "ssl.keystore.location",
            f"a PEM file with the certificate and key for the TLS listeners ({', '.join(tls)})",
        )
    # PLAIN is offered only on SASL_SSL listeners (broker/main.py): never a password in clear.
    if inter_broker.security_protocol.uses_sasl:
        if values["inter_broker_login"] is None:
            raise given.fail(
                "sasl.jaas.config",
                f"this broker's login for its SASL inter-broker listener {inter_broker.name}",
            )
        mechanism = values["sasl_mechanism_inter_broker_protocol"]
        if mechanism not in values["sasl_enabled_mechanisms"]:
            raise given.fail(
                "sasl.mechanism.inter.broker.protocol",
                f"one of sasl.enabled.mechanisms ({', '.join(values['sasl_enabled_mechanisms'])})",
            )
        if mechanism == "PLAIN" and not inter_broker.security_protocol.uses_tls:
            raise given.fail("sasl.mechanism.inter.broker.protocol", "SCRAM on SASL_PLAINTEXT")
