"""How a broker connects to other brokers (replica fetches, controller requests, controlled
shutdown, its health check): its inter-broker listener's protocol, its TLS files, and its
`sasl.jaas.config` login with `sasl.mechanism.inter.broker.protocol`."""

from __future__ import annotations

import functools

from broker.config import BrokerConfig
from client.security import ClientSecurity

__all__ = ["inter_broker_security"]


@functools.cache
def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """None for a PLAINTEXT inter-broker listener. Cached: one TLS context per config."""
    protocol = config.inter_broker_listener.security_protocol
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
