"""ApiVersions: the APIs and versions this broker speaks."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.apis import supported_versions
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

__all__ = ["handle_api_versions"]


async def handle_api_versions(
    ctx: BrokerContext, header: RequestHeader, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return ApiVersionsResponse(ErrorCode.NONE, supported_versions())
