"""Version negotiation on one Kafka release: what pykaf picks is what the broker speaks.

Every test of this suite also checks each request it sent against the
broker's ApiVersions range (``conftest.negotiation``); this one checks the
choice for every API pykaf knows, and that every version the broker speaks
beyond pykaf's message classes is one ``pykaf.protocol.versions`` lists with
its reason, so a new release's protocol changes cannot pass unnoticed.
"""

from __future__ import annotations

import pytest

import pykaf
from pykaf import protocol as P
from pykaf.protocol import versions
from pykaf.testing import KafkaCluster


@pytest.mark.compat("KIP-35", "Version negotiation (ApiVersions)")
async def test_every_api_is_negotiated_within_both_ranges(kafka: KafkaCluster) -> None:
    async with pykaf.open_client(kafka.bootstrap) as client:
        bv = (await client.any_connection()).versions
    assert bv.ranges, "the broker advertised no API"
    listed = {(n.api_key, n.version) for n in versions.NEWER_VERSIONS}
    unlisted = []
    for key, request in P.REQUESTS.items():
        if key not in bv.ranges:
            assert key not in bv.chosen
            continue
        lo, hi = bv.ranges[key]
        chosen = bv.chosen[key]
        assert max(lo, request.MIN_VERSION) <= chosen <= min(hi, request.MAX_VERSION)
        cap = versions.CLIENT_CAPS.get(key)
        assert chosen == min(hi, request.MAX_VERSION, cap.max_version if cap else hi)
        unlisted += [
            (P.API_NAMES[key], v)
            for v in range(request.MAX_VERSION + 1, hi + 1)
            if (key, v) not in listed
        ]
    assert not unlisted, f"versions the broker speaks that NEWER_VERSIONS lacks: {unlisted}"
    major, minor = kafka.release.line
    assert versions.broker_release(bv).startswith(f"Kafka {major}.{minor} (metadata.version ")
