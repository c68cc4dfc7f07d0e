"""The admin client's config operations (Kafka's Admin incrementalAlterConfigs and
describeConfigs), mixed into client.admin.Admin.

A broker's own configs are asked of that broker (as Kafka's admin client does); topic configs
and the cluster-wide broker defaults go to the controller, or to any broker when there is
none. docs/operations.md ("Changing configs on a running cluster") says what can change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.errors import HighwaterClientError, error_for_code
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from protocol.errors import ErrorCode
from protocol.messages.common import ConfigResourceType
from protocol.messages.describe_configs import (
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigOpType,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = [
    "AlterConfigOp",
    "ConfigAdmin",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
]


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """Kafka's ConfigResource: a topic, a broker by id, or (BROKER, "") the cluster-wide
    dynamic broker defaults."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | None = None) -> ConfigResource:
        """Broker `broker_id`'s configs; None: the cluster-wide defaults."""
        return cls(ConfigResourceType.BROKER, "" if broker_id is None else str(broker_id))

    def __str__(self) -> str:
        if self.type == ConfigResourceType.TOPIC:
            return f"topic {self.name!r}"
        return f"broker {self.name}" if self.name else "the cluster-wide broker defaults"


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """Kafka's AlterConfigOp: SET `name` to `value`, or DELETE it (back to the default)."""

    name: str
    op: AlterConfigOpType = AlterConfigOpType.SET
    value: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs reports it: its value, where the value comes from, and
    (when asked for) every source it could come from, highest precedence first."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None


class ConfigAdmin:
    """The configs half of Admin (which provides `metadata` and the way to the controller)."""

    metadata: ClusterMetadata
    request_timeout_ms: int

    async def _to_controller(self, request: object, timeout_ms: int) -> Any:
        raise NotImplementedError  # Admin's

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Kafka's Admin.incrementalAlterConfigs: per resource, SET or DELETE configs. Each
        resource succeeds or fails whole; the first failure is raised (HighwaterClientError
        named INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION..., with the broker's
        message naming the key). Every broker applies a change within seconds."""
        for target, resources in self._config_targets(changes).items():
            part = IncrementalAlterConfigsRequest(
                tuple(
                    AlterConfigsResource(
                        r.type,
                        r.name,
                        tuple(AlterableConfig(o.name, o.op, o.value) for o in changes[r]),
                    )
                    for r in resources
                ),
                validate_only,
            )
            response: IncrementalAlterConfigsResponse = await self._to_config_target(target, part)
            for result in response.responses:
                if result.error_code != ErrorCode.NONE:
                    resource = ConfigResource(
                        ConfigResourceType(result.resource_type), result.resource_name
                    )
                    raise error_for_code(
                        result.error_code, f"alter configs of {resource}", result.error_message
                    )

    async def alter_topic_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and delete (back to the broker default) configs of `topic`."""
        await self.incremental_alter_configs(
            {ConfigResource.topic(topic): _ops(set_configs, delete_configs)},
            validate_only=validate_only,
        )

    async def alter_broker_defaults(
        self,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and delete cluster-wide dynamic broker defaults (`log.retention.ms`, ...): they
        apply to every broker, over its server.properties, and to every topic without an
        override."""
        await self.incremental_alter_configs(
            {ConfigResource.broker(): _ops(set_configs, delete_configs)},
            validate_only=validate_only,
        )

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, list[ConfigEntry]]:
        """Kafka's Admin.describeConfigs: each resource's configs with their values and
        sources. A failed resource raises (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        wanted = list(dict.fromkeys(resources))
        out: dict[ConfigResource, list[ConfigEntry]] = {}
        for target, part in self._config_targets(dict.fromkeys(wanted)).items():
            request = DescribeConfigsRequest(
                tuple(DescribeConfigsResource(r.type, r.name) for r in part),
                include_synonyms,
                include_documentation,
            )
            response: DescribeConfigsResponse = (
                await self._to_config_target(target, request)
                if target is not None
                # A read any broker answers: a hung controller (stopped, its ZooKeeper session
                # not yet expired) costs metadata_attempt_timeout_ms, not two request timeouts.
                else await self.metadata.ask_any(request, prefer=self.metadata.controller_id)
            )
            for result in response.results:
                resource = ConfigResource(
                    ConfigResourceType(result.resource_type), result.resource_name
                )
                if result.error_code != ErrorCode.NONE:
                    raise error_for_code(
                        result.error_code, f"describe configs of {resource}", result.error_message
                    )
                out[resource] = [
                    ConfigEntry(
                        c.name,
                        c.value,
                        _source(c.config_source),
                        c.read_only,
                        c.is_sensitive,
                        tuple(
                            ConfigSynonym(s.name, s.value, _source(s.source)) for s in c.synonyms
                        ),
                        c.documentation,
                    )
                    for c in result.configs
                ]
        return {r: out[r] for r in wanted if r in out}

    def _config_targets(
        self, resources: Mapping[ConfigResource, object]
    ) -> dict[int | None, list[ConfigResource]]:
        """Which broker to ask about what: a broker's own configs that broker (as Kafka's
        admin client), everything else the controller or any broker (None)."""
        targets: dict[int | None, list[ConfigResource]] = {}
        for resource in resources:
            named_broker = resource.type == ConfigResourceType.BROKER and resource.name.isdigit()
            targets.setdefault(int(resource.name) if named_broker else None, []).append(resource)
        return targets

    async def _to_config_target(self, target: int | None, request: object) -> Any:
        if target is None:
            return await self._to_controller(request, self.request_timeout_ms)
        if target not in self.metadata.brokers:
            await self.metadata.refresh()
        if target not in self.metadata.brokers:
            raise HighwaterClientError(
                f"BROKER_NOT_AVAILABLE: broker {target} is not in the cluster",
                ErrorCode.BROKER_NOT_AVAILABLE,
            )
        try:
            return await self.metadata.request(
                target, request, timeout_ms=2 * self.request_timeout_ms
            )
        except BrokerConnectionError as exc:
            self.metadata.request_update()
            raise HighwaterClientError(
                f"NETWORK_EXCEPTION: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from exc


def _ops(
    set_configs: Mapping[str, str] | None, delete_configs: Iterable[str]
) -> list[AlterConfigOp]:
    ops = [AlterConfigOp(k, AlterConfigOpType.SET, v) for k, v in (set_configs or {}).items()]
    return ops + [AlterConfigOp(k, AlterConfigOpType.DELETE) for k in delete_configs]


def _source(code: int) -> ConfigSource:
    try:
        return ConfigSource(code)
    except ValueError:
        return ConfigSource.UNKNOWN
