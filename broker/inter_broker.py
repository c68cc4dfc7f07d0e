"""How a broker connects to other brokers (replica fetches, controller requests, controlled
shutdown, its health check): its inter-broker listener's protocol, its TLS files, and its
`sasl.jaas.config` login with `sasl.mechanism.inter.broker.protocol`."""

from __future__ import annotations

import functools

from broker.config.broker_config import BrokerConfig
from broker.listeners import SecurityProtocol
from client.security import ClientSecurity

__all__ = ["control_plane_security", "inter_broker_security"]


@functools.cache
def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """None for a PLAINTEXT inter-broker listener. Cached: one TLS context per config."""
    return _security(config, config.inter_broker_listener.security_protocol)


@functools.cache
def control_plane_security(config: BrokerConfig) -> ClientSecurity | None:
    """How the controller's requests and ControlledShutdown reach the control-plane listener
    (KIP-291; the inter-broker one when control.plane.listener.name is unset)."""
    return _security(config, config.control_plane_listener.security_protocol)


def _security(config: BrokerConfig, protocol: SecurityProtocol) -> ClientSecurity | None:
    if not protocol.uses_tls and not protocol.uses_sasl:
        return None
    login = config.inter_broker_login
    return ClientSecurity(
        protocol=str(protocol),
        sasl_mechanism=config.sasl_mechanism_inter_broker_protocol,
        username=login.username if login else None,
        password=login.password if login else None,
        ssl_cafile=config.ssl_truststore_location,
        # Its own certificate too: other brokers may require client certificates.
        ssl_certfile=config.ssl_keystore_location,
        ssl_key_password=config.ssl_key_password,
        check_hostname=config.ssl_endpoint_identification_algorithm == "https",
    )
