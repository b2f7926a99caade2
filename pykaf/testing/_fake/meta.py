"""ApiVersions, Metadata, DescribeCluster and the SASL handshake on the fake cluster."""

from __future__ import annotations

import logging
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.data import valid_topic_name
from pykaf.testing._fake.sasl import SaslFailure

log = logging.getLogger("pykaf.testing.fake")

_NO_OPS = -2147483648


async def api_versions(ctx: RequestContext, req: P.ApiVersionsRequest, version: int) -> Any:
    """Every API and version range the cluster answers."""
    if version >= 3:  # the client's software, for client-metrics subscriptions (KIP-714)
        ctx.session.software_name = req.client_software_name
        ctx.session.software_version = req.client_software_version
    return ctx.cluster.api_versions()


def _unknown_topic(name: str, code: int) -> P.MetadataResponseTopic:
    return P.MetadataResponseTopic(
        error_code=code, name=name, partitions=[], topic_authorized_operations=_NO_OPS
    )


def _metadata_topic(ctx: RequestContext, name: str) -> P.MetadataResponseTopic:
    cluster = ctx.cluster
    topic = cluster.topics.get(name)
    if topic is None:
        return _unknown_topic(name, errors.UnknownTopicOrPartitionError.code)
    parts = [
        P.MetadataResponsePartition(
            error_code=0,
            partition_index=p.index,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.replicas),
            offline_replicas=[],
        )
        for p in topic.partitions
    ]
    return P.MetadataResponseTopic(
        error_code=0,
        name=name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=parts,
        topic_authorized_operations=_NO_OPS,
    )


async def metadata(ctx: RequestContext, req: P.MetadataRequest, version: int) -> Any:
    """Brokers, controller and topics; auto-creates named topics when allowed."""
    cluster = ctx.cluster
    invalid: set[str] = set()
    creating: set[str] = set()
    if req.topics is None:
        names = sorted(cluster.topics)
    else:
        names = []
        for t in req.topics:
            name = t.name
            if name is None:
                by_id = [n for n, topic in cluster.topics.items() if topic.topic_id == t.topic_id]
                name = by_id[0] if by_id else None
            if name is None:
                continue
            if name not in cluster.topics and (version < 4 or req.allow_auto_topic_creation):
                if not valid_topic_name(name):
                    invalid.add(name)
                elif cluster.auto_create_topics:
                    # Kafka creates it through the controller and answers this
                    # request UNKNOWN_TOPIC_OR_PARTITION; the next one sees it
                    cluster.create_topic(name)
                    creating.add(name)
            names.append(name)
    brokers = [
        P.MetadataResponseBroker(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in cluster.nodes.values()
    ]
    return P.MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=[
            _unknown_topic(name, errors.InvalidTopicError.code)
            if name in invalid
            else _unknown_topic(name, errors.UnknownTopicOrPartitionError.code)
            if name in creating
            else _metadata_topic(ctx, name)
            for name in names
        ],
    )


async def describe_cluster(ctx: RequestContext, req: P.DescribeClusterRequest, version: int) -> Any:
    """The brokers and the controller."""
    cluster = ctx.cluster
    return P.DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=[
            P.DescribeClusterResponse.DescribeClusterBroker(
                broker_id=n.node_id, host=n.host, port=n.port, rack=n.rack
            )
            for n in cluster.nodes.values()
        ],
    )


async def sasl_handshake(ctx: RequestContext, req: P.SaslHandshakeRequest, version: int) -> Any:
    """Choose a mechanism; v0 switches the connection to bare tokens."""
    sasl = ctx.cluster.sasl
    code = sasl.handshake(ctx.session, req.mechanism)
    if code == 0 and version == 0:
        ctx.session.raw_sasl = True
    return P.SaslHandshakeResponse(error_code=code, mechanisms=list(sasl.mechanisms))


async def sasl_authenticate(
    ctx: RequestContext, req: P.SaslAuthenticateRequest, version: int
) -> Any:
    """One step of the exchange; a failure answers SASL_AUTHENTICATION_FAILED, then closes."""
    try:
        reply, _done = ctx.cluster.sasl.authenticate(ctx.session, bytes(req.auth_bytes))
    except SaslFailure as exc:
        log.debug("%s: SASL failed: %s", ctx.session.peer, exc)
        ctx.session.extra["close_after_reply"] = True
        return P.SaslAuthenticateResponse(
            error_code=(errors.SaslAuthenticationError.code),
            error_message=str(exc),
            auth_bytes=b"",
        )
    return P.SaslAuthenticateResponse(
        error_code=0, error_message=None, auth_bytes=reply, session_lifetime_ms=0
    )


def _sasl_error(req: Any, version: int, code: int) -> P.SaslAuthenticateResponse:
    return P.SaslAuthenticateResponse(error_code=code, error_message="injected", auth_bytes=b"")


APIS = [
    Api(P.ApiVersionsRequest, P.ApiVersionsResponse, api_versions, 0, 3, before_auth=True),
    Api(P.MetadataRequest, P.MetadataResponse, metadata, 0, 13),
    Api(P.DescribeClusterRequest, P.DescribeClusterResponse, describe_cluster, 0, 1),
    Api(P.SaslHandshakeRequest, P.SaslHandshakeResponse, sasl_handshake, 0, 1, before_auth=True),
    Api(
        P.SaslAuthenticateRequest,
        P.SaslAuthenticateResponse,
        sasl_authenticate,
        0,
        2,
        error=_sasl_error,
        before_auth=True,
    ),
]
