"""KIP-714 on the fake cluster: GetTelemetrySubscriptions and PushTelemetry.

The rules are ``client_telemetry.py``'s. Kafka answers both APIs whether or
not a telemetry plugin is configured, and advertises them in ApiVersions only
with one; the fake does the same with its ``client_telemetry`` option.
"""

from __future__ import annotations

from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.client_telemetry import (
    ACCEPTED_COMPRESSION_TYPES,
    RESERVED,
    ZERO_UUID,
    client_attributes,
)

_INVALID_REQUEST = errors.InvalidRequestError.code


def _now_ms() -> float:
    return trio.current_time() * 1000


async def get_telemetry_subscriptions(
    ctx: RequestContext, req: P.GetTelemetrySubscriptionsRequest, version: int
) -> Any:
    """The subscription of the client instance (a new instance id for zero)."""
    state = ctx.cluster.telemetry
    instance_id = req.client_instance_id
    if instance_id == ZERO_UUID:
        instance_id = state.new_instance_id()
    now = _now_ms()
    inst = state.instance(
        ctx.broker.node_id,
        instance_id,
        ctx.session,
        client_attributes(ctx.header.client_id, ctx.session),
        now,
    )
    code = state.check_get(inst, now)
    if code:
        return P.GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=code)
    return P.GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0,
        error_code=0,
        client_instance_id=instance_id,
        subscription_id=inst.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
        push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=state.max_bytes,
        delta_temporality=True,
        requested_metrics=list(inst.metrics),
    )


async def push_telemetry(ctx: RequestContext, req: P.PushTelemetryRequest, version: int) -> Any:
    """Check the push against the client instance and keep its metrics."""
    state = ctx.cluster.telemetry
    if req.client_instance_id in RESERVED:
        return P.PushTelemetryResponse(throttle_time_ms=0, error_code=_INVALID_REQUEST)
    now = _now_ms()
    inst = state.instance(
        ctx.broker.node_id,
        req.client_instance_id,
        ctx.session,
        client_attributes(ctx.header.client_id, ctx.session),
        now,
    )
    code = state.push(inst, req, ctx.broker.node_id, ctx.header.client_id, now)
    return P.PushTelemetryResponse(throttle_time_ms=0, error_code=code)


APIS = [
    Api(
        P.GetTelemetrySubscriptionsRequest,
        P.GetTelemetrySubscriptionsResponse,
        get_telemetry_subscriptions,
        0,
        0,
    ),
    Api(P.PushTelemetryRequest, P.PushTelemetryResponse, push_telemetry, 0, 0),
]
