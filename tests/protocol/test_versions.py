"""The version-cap table (pykaf.protocol.versions): real versions, applied where they say."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from pykaf import errors
from pykaf import protocol as P
from pykaf.protocol import versions
from pykaf.protocol.connection import BrokerVersions, negotiate


@pytest.mark.parametrize("cap", versions.ALL_CAPS, ids=lambda c: P.API_NAMES[c.api_key])
def test_each_cap_is_a_version_pykaf_speaks_below_its_newest(cap: versions.VersionCap) -> None:
    req = P.REQUESTS[cap.api_key]
    assert req.MIN_VERSION <= cap.max_version < req.MAX_VERSION
    assert cap.reason.strip()


class _Conn:
    def __init__(self, chosen: dict[int, int]) -> None:
        self.chosen = chosen

    def version_for(self, api_key: int) -> int:
        if api_key not in self.chosen:
            raise errors.UnsupportedVersionError(f"api {api_key}")
        return self.chosen[api_key]


def test_pick_takes_the_lower_of_the_cap_and_the_negotiated_version() -> None:
    cap = versions.FETCH
    assert cap.pick(_Conn({cap.api_key: 17})) == cap.max_version
    assert cap.pick(_Conn({cap.api_key: 4})) == 4
    with pytest.raises(errors.UnsupportedVersionError):
        cap.pick(_Conn({}))


def test_client_caps_apply_at_negotiation() -> None:
    key = versions.ADD_PARTITIONS_TO_TXN.api_key
    fetch = versions.FETCH.api_key
    chosen = negotiate({key: (0, 5), fetch: (4, 17)}).chosen
    assert chosen[key] == versions.ADD_PARTITIONS_TO_TXN.max_version
    # a cap of one use only is not applied to every request of its API
    assert chosen[fetch] == min(17, P.FetchRequest.MAX_VERSION)


def test_design_doc_lists_every_cap() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "design.md").read_text()
    for cap in versions.ALL_CAPS:
        assert f"| {P.API_NAMES[cap.api_key]} | {cap.max_version} |" in doc


@pytest.mark.parametrize("newer", versions.NEWER_VERSIONS, ids=lambda n: P.API_NAMES[n.api_key])
def test_each_newer_version_is_one_pykaf_does_not_send(newer: versions.NewerVersion) -> None:
    assert newer.version > P.REQUESTS[newer.api_key].MAX_VERSION
    assert newer.reason.strip() and newer.since in {"4.0", "4.1", "4.2", "4.3", "4.4"}


# ApiVersions as Kafka 3.9.1, 4.0.2 and 4.1.2 answer it (the parts read here).
KAFKA_3_9 = BrokerVersions({68: (0, 0)}, {68: 0}, {"metadata.version": 21})
KAFKA_4_0 = BrokerVersions(
    {68: (0, 1)}, {68: 1}, {"metadata.version": 25, "group.version": 1, "transaction.version": 2}
)
KAFKA_4_1 = BrokerVersions(
    {68: (0, 1), 76: (1, 1)}, {68: 1, 76: 1}, {"metadata.version": 27, "group.version": 1}
)


@pytest.mark.parametrize(
    ("level", "named"),
    [
        (19, "Kafka 3.7 (metadata.version 19)"),
        (21, "Kafka 3.9 (metadata.version 21)"),
        (25, "Kafka 4.0 (metadata.version 25)"),
        (30, "Kafka 4.3 (metadata.version 30)"),
        (33, "Kafka 4.4 (metadata.version 33)"),
        (34, "Kafka newer than 4.4 (metadata.version 34)"),
        (5, "Kafka older than 3.3 (metadata.version 5)"),
    ],
)
def test_broker_release_from_metadata_version(level: int, named: str) -> None:
    assert versions.broker_release(BrokerVersions({}, {}, {"metadata.version": level})) == named


def test_a_broker_without_metadata_version_says_so() -> None:
    assert "no metadata.version" in versions.broker_release(BrokerVersions({}, {}, {}))


def test_consumer_groups_are_refused_on_kafka_3_naming_it() -> None:
    # Kafka 3.7-3.9 advertise ConsumerGroupHeartbeat v0 (early access) but finalize
    # no group.version: pykaf refuses them before the first heartbeat.
    with pytest.raises(versions.BrokerFeatureError) as info:
        versions.require(KAFKA_3_9, versions.CONSUMER_GROUPS)
    assert isinstance(info.value, errors.UnsupportedVersionError)
    assert info.value.broker == "Kafka 3.9 (metadata.version 21)"
    assert "Kafka 4.0 or newer" in str(info.value) and "group.version" in str(info.value)
    versions.require(KAFKA_4_0, versions.CONSUMER_GROUPS)
    # a broker that reports no metadata.version is taken at its ApiVersions word
    versions.require(BrokerVersions({68: (0, 1)}, {68: 1}, {}), versions.CONSUMER_GROUPS)


def test_share_groups_need_the_api_and_share_version() -> None:
    with pytest.raises(versions.BrokerFeatureError, match=r"Kafka 4\.0 \(metadata"):
        versions.require(KAFKA_4_0, versions.SHARE_GROUPS)  # no ShareGroupHeartbeat
    with pytest.raises(versions.BrokerFeatureError, match=r"share\.version"):
        versions.require(KAFKA_4_1, versions.SHARE_GROUPS)  # a preview, not turned on
    on = BrokerVersions(
        KAFKA_4_1.ranges, KAFKA_4_1.chosen, {"metadata.version": 27, "share.version": 1}
    )
    versions.require(on, versions.SHARE_GROUPS)


def test_broker_feature_error_survives_pickle_and_copy() -> None:
    """Its fields come back (``args`` alone holds only the message)."""
    err = versions.BrokerFeatureError("consumer groups (KIP-848)", "Kafka 3.9", "Kafka 4.0+")
    for back in (pickle.loads(pickle.dumps(err)), copy.copy(err), copy.deepcopy(err)):
        assert type(back) is versions.BrokerFeatureError
        assert (back.feature, back.broker, back.needs) == (err.feature, err.broker, err.needs)
        assert str(back) == str(err)
        assert isinstance(back, errors.UnsupportedVersionError)
