"""The highest request versions pykaf sends, below what both sides speak, each with its reason.

A connection negotiates, per API, the highest version pykaf's message classes
and the broker both speak (:func:`pykaf.protocol.connection.negotiate`). Some
newer versions change meaning, not only shape, so a caller stops lower: this
module is the one list of those caps. :data:`CLIENT_CAPS` apply to every
request of their API at negotiation; the others are caps of one use of an API
(the admin client, for one, reads offsets in OffsetFetch's newer groups form
while the group's offset manager stays on the single-group one), picked with
:meth:`VersionCap.pick`.

Caps that exist only because one test broker mishandles a version are broker
workarounds and live in :mod:`pykaf.protocol.quirks`.

:data:`NEWER_VERSIONS` lists the versions Apache Kafka 4.0 to 4.4 speak
beyond pykaf's message classes (``tests/data/kafka-specs``), each with the
release that brought it and why pykaf stays below it; the compatibility suite
(``tests/brokers``) fails on a broker that advertises one not listed.
:data:`BROKER_FEATURES` are what a broker must have for a feature pykaf opens
on request (KIP-848 groups, share groups): :func:`require` refuses a broker
that lacks one with a :class:`BrokerFeatureError` naming its release
(:func:`broker_release`, from its ``metadata.version``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pykaf import errors
from pykaf.protocol._messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from pykaf.protocol._messages.api_versions import ApiVersionsRequest
from pykaf.protocol._messages.consumer_group_describe import ConsumerGroupDescribeRequest
from pykaf.protocol._messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from pykaf.protocol._messages.delete_groups import DeleteGroupsRequest
from pykaf.protocol._messages.describe_cluster import DescribeClusterRequest
from pykaf.protocol._messages.describe_groups import DescribeGroupsRequest
from pykaf.protocol._messages.end_txn import EndTxnRequest
from pykaf.protocol._messages.fetch import FetchRequest
from pykaf.protocol._messages.heartbeat import HeartbeatRequest
from pykaf.protocol._messages.join_group import JoinGroupRequest
from pykaf.protocol._messages.leave_group import LeaveGroupRequest
from pykaf.protocol._messages.list_offsets import ListOffsetsRequest
from pykaf.protocol._messages.offset_commit import OffsetCommitRequest
from pykaf.protocol._messages.offset_fetch import OffsetFetchRequest
from pykaf.protocol._messages.produce import ProduceRequest
from pykaf.protocol._messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from pykaf.protocol._messages.sync_group import SyncGroupRequest
from pykaf.protocol._messages.txn_offset_commit import TxnOffsetCommitRequest


class _Versions(Protocol):
    def version_for(self, api_key: int) -> int: ...


class _Advertised(Protocol):
    """What :func:`require` reads of a connection's negotiated versions."""

    ranges: dict[int, tuple[int, int]]

    def feature_level(self, name: str) -> int: ...


@dataclass(frozen=True)
class VersionCap:
    """The highest version of one API that pykaf sends for one use, and why."""

    api_key: int
    max_version: int
    reason: str

    def pick(self, conn: _Versions) -> int:
        """The negotiated version of ``conn`` for this API, capped.

        Raises:
            UnsupportedVersionError: the broker speaks no version of the API.
        """
        return min(self.max_version, conn.version_for(self.api_key))


#: Fetch by topic name: the fetcher, the demo, the partitions' ends.
FETCH = VersionCap(
    FetchRequest.API_KEY,
    12,
    "Fetch v13+ names topics by id; pykaf fetches by name (every broker since Kafka 3.1 "
    "speaks v12).",
)
#: The group's offset manager commits in the classic group protocol.
OFFSET_COMMIT = VersionCap(
    OffsetCommitRequest.API_KEY,
    8,
    "OffsetCommit v9+ is the KIP-848 consumer group form; pykaf's groups are classic.",
)
#: The group's offset manager reads one group's offsets.
OFFSET_FETCH = VersionCap(
    OffsetFetchRequest.API_KEY,
    7,
    "OffsetFetch v8+ asks for several groups at once (and v9+ is KIP-848's form); the "
    "offset manager asks for its own group in the single-group form.",
)
#: The classic group protocol's four calls: the last versions before the
#: flexible encoding, which is what librdkafka sends.
#: quirk: mock-flexible-group-calls
JOIN_GROUP = VersionCap(
    JoinGroupRequest.API_KEY,
    5,
    "JoinGroup v6+ (flexible) adds only a reason field pykaf does not send; librdkafka's "
    "mock cluster advertises v6 but drops the connection on it.",
)
SYNC_GROUP = VersionCap(
    SyncGroupRequest.API_KEY,
    3,
    "SyncGroup v4+ (flexible) adds nothing pykaf uses; librdkafka's mock cluster "
    "advertises v4 but drops the connection on it.",
)
HEARTBEAT = VersionCap(
    HeartbeatRequest.API_KEY,
    3,
    "Heartbeat v4+ (flexible) adds nothing pykaf uses; kept with the other group calls.",
)
LEAVE_GROUP = VersionCap(
    LeaveGroupRequest.API_KEY,
    2,
    "LeaveGroup v3+ adds batched members and v5 a reason; librdkafka's mock cluster answers "
    "v3 in the v2 layout.",
)
#: Transactions.
ADD_PARTITIONS_TO_TXN = VersionCap(
    AddPartitionsToTxnRequest.API_KEY,
    3,
    "AddPartitionsToTxn v4+ is the brokers' batched, verify-only form (KIP-890): clients "
    "speak v3 at most.",
)
END_TXN = VersionCap(
    EndTxnRequest.API_KEY,
    4,
    "EndTxn v5 bumps the producer epoch at every transaction's end (KIP-890 part 2, "
    "transactions V2): a producer on transactions V1 sends v4 at most.",
)
#: A transactional producer on transactions V1 (the broker's transaction.version
#: is below 2, or it lacks the V2 versions).
PRODUCE_TXN_V1 = VersionCap(
    ProduceRequest.API_KEY,
    11,
    "Produce v12 tells the broker the transactional producer uses transactions V2 "
    "(KIP-890 part 2: the partition joins the transaction implicitly); on V1 it sends v11 "
    "at most, after AddPartitionsToTxn.",
)
TXN_OFFSET_COMMIT_V1 = VersionCap(
    TxnOffsetCommitRequest.API_KEY,
    4,
    "TxnOffsetCommit v5 adds the group to the transaction implicitly (transactions V2, "
    "no AddOffsetsToTxn); on V1 it sends v4 at most, after AddOffsetsToTxn.",
)

#: Caps applied to every request of their API when a connection negotiates.
CLIENT_CAPS: dict[int, VersionCap] = {ADD_PARTITIONS_TO_TXN.api_key: ADD_PARTITIONS_TO_TXN}

#: Every cap, for the docs and the tests.
ALL_CAPS: tuple[VersionCap, ...] = (
    FETCH,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    JOIN_GROUP,
    SYNC_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    PRODUCE_TXN_V1,
    TXN_OFFSET_COMMIT_V1,
)


# -- versions newer than pykaf's message classes --------------------------------------


@dataclass(frozen=True)
class NewerVersion:
    """A version a Kafka release speaks beyond pykaf's classes, and why pykaf stays below it."""

    api_key: int
    version: int
    since: str
    reason: str


#: Every version Apache Kafka 4.0 to 4.4 advertise above what pykaf's classes
#: encode (measured on each release by ``tests/brokers/test_versions.py``).
#: pykaf negotiates below them: each adds nothing pykaf uses, or needs what
#: pykaf does not do (topic ids in place of names).
NEWER_VERSIONS: tuple[NewerVersion, ...] = (
    NewerVersion(
        DescribeGroupsRequest.API_KEY,
        6,
        "4.0",
        "v6 answers GROUP_ID_NOT_FOUND for an unknown group (KIP-1043) where v5 answers a "
        "DEAD group; pykaf reads DEAD as not found already.",
    ),
    NewerVersion(
        DescribeClusterRequest.API_KEY,
        2,
        "4.0",
        "v2 adds IncludeFencedBrokers (KIP-1073), which pykaf never asks for.",
    ),
    NewerVersion(
        ConsumerGroupDescribeRequest.API_KEY,
        1,
        "4.0",
        "v1 adds each member's MemberType (KIP-1099); the request is v0's, and pykaf's "
        "describe does not report the type.",
    ),
    NewerVersion(
        ProduceRequest.API_KEY,
        13,
        "4.1",
        "v13 names topics by id instead of name (KIP-516); pykaf produces by name.",
    ),
    NewerVersion(
        FetchRequest.API_KEY,
        18,
        "4.1",
        "v18 adds the follower's high watermark (KIP-1166), a replica's field; pykaf fetches "
        "by name at v12 anyway (FETCH).",
    ),
    NewerVersion(
        ListOffsetsRequest.API_KEY,
        11,
        "4.2",
        "v11 adds the earliest pending upload offset of tiered storage (KIP-1023), which "
        "pykaf never asks for.",
    ),
    NewerVersion(
        OffsetCommitRequest.API_KEY,
        10,
        "4.2",
        "v10 names topics by id instead of name (KIP-848); pykaf commits by name.",
    ),
    NewerVersion(
        OffsetFetchRequest.API_KEY,
        10,
        "4.2",
        "v10 names topics by id instead of name (KIP-848); pykaf reads offsets by name.",
    ),
    NewerVersion(
        ApiVersionsRequest.API_KEY,
        5,
        "4.4",
        "v5 lets a client name the cluster id and node id it means to reach, answered with "
        "REBOOTSTRAP_REQUIRED on a mismatch (KIP-1242); pykaf does not track cluster ids, "
        "so v4 says the same.",
    ),
    NewerVersion(
        DeleteGroupsRequest.API_KEY,
        3,
        "4.4",
        "v3 adds a per-group error message to the answer; the request is v2's and the error "
        "code, which pykaf raises, is the same.",
    ),
    NewerVersion(
        TxnOffsetCommitRequest.API_KEY,
        6,
        "4.4",
        "v6 names topics by id instead of name and takes a consumer-protocol member epoch "
        "(KIP-1319); pykaf's transactional commits name topics.",
    ),
)


# -- features a broker must have -------------------------------------------------------

#: The Kafka release each ``metadata.version`` feature level belongs to
#: (``MetadataVersion``'s IBP_X_Y_IVn, read from Kafka 4.4.0's jar), as
#: ``(lowest level, highest level, release)``.
METADATA_VERSION_RELEASES: tuple[tuple[int, int, str], ...] = (
    (7, 7, "3.3"),
    (8, 8, "3.4"),
    (9, 11, "3.5"),
    (12, 14, "3.6"),
    (15, 19, "3.7"),
    (20, 20, "3.8"),
    (21, 21, "3.9"),
    (22, 25, "4.0"),
    (26, 27, "4.1"),
    (28, 29, "4.2"),
    (30, 30, "4.3"),
    (31, 33, "4.4"),
)


def broker_release(versions: _Advertised) -> str:
    """The broker's release, as far as its finalized ``metadata.version`` tells.

    ``"Kafka 3.9 (metadata.version 21)"``; a level newer than the table names
    the newest known release as a floor; a broker that reports no level
    (ZooKeeper mode, Kafka before 3.3, another implementation) says so.
    """
    level = versions.feature_level("metadata.version")
    if level <= 0:
        return "a broker that reports no metadata.version (ZooKeeper mode or not Apache Kafka)"
    for low, high, release in METADATA_VERSION_RELEASES:
        if low <= level <= high:
            return f"Kafka {release} (metadata.version {level})"
    low, _, oldest = METADATA_VERSION_RELEASES[0]
    if level < low:
        return f"Kafka older than {oldest} (metadata.version {level})"
    newest = METADATA_VERSION_RELEASES[-1][2]
    return f"Kafka newer than {newest} (metadata.version {level})"


class BrokerFeatureError(errors.UnsupportedVersionError):
    """The broker lacks a feature pykaf was asked to use (raised by pykaf at open).

    Attributes:
        feature: what was asked for, ``"consumer groups (KIP-848)"``.
        broker: the broker's release as :func:`broker_release` names it.
        needs: what the feature needs, ``"Kafka 4.0+: ..."``.
    """

    def __init__(self, feature: str, broker: str, needs: str) -> None:
        self.feature = feature
        self.broker = broker
        self.needs = needs
        super().__init__(f"{feature} need {needs}; the broker is {broker}")

    def __reduce__(self) -> tuple[Any, ...]:
        # ``args`` holds the message only: rebuild from the three fields instead.
        return (type(self), (self.feature, self.broker, self.needs))


@dataclass(frozen=True)
class BrokerFeature:
    """What a broker must advertise for one feature pykaf opens on request."""

    name: str
    since: str
    api_key: int
    min_version: int
    #: A finalized feature Apache Kafka must also have at level 1+; only read
    #: from brokers that report ``metadata.version`` (Apache Kafka in KRaft
    #: mode): other brokers are taken at their ApiVersions word.
    feature: str | None = None

    def needs(self) -> str:
        """What the feature needs, in words."""
        what = f"{type_name(self.api_key)} v{self.min_version}+"
        if self.feature is not None:
            what += f" and {self.feature} >= 1"
        return f"Kafka {self.since} or newer ({what})"


def type_name(api_key: int) -> str:
    """The API's name, ``ConsumerGroupHeartbeat`` (its key for one pykaf does not know)."""
    from pykaf.protocol._messages import API_NAMES

    return API_NAMES.get(api_key, f"API {api_key}")


#: KIP-848 consumer groups (``group_protocol="consumer"``): Kafka 3.7 to 3.9
#: advertise ConsumerGroupHeartbeat v0 as an early access but finalize no
#: ``group.version``; 4.0 finalizes group.version 1 and makes them GA.
CONSUMER_GROUPS = BrokerFeature(
    "consumer groups (group_protocol='consumer', KIP-848)",
    "4.0",
    ConsumerGroupHeartbeatRequest.API_KEY,
    0,
    "group.version",
)
#: KIP-932 share groups: ShareGroupHeartbeat v1 (the first stable version) from
#: 4.1, where they are a preview a cluster turns on with ``share.version`` 1;
#: 4.2 finalizes share.version 1 by default.
SHARE_GROUPS = BrokerFeature(
    "share groups (KIP-932)",
    "4.1",
    ShareGroupHeartbeatRequest.API_KEY,
    max(1, ShareGroupHeartbeatRequest.MIN_VERSION),
    "share.version",
)

#: Every feature :func:`require` checks, for the docs and the tests.
BROKER_FEATURES: tuple[BrokerFeature, ...] = (CONSUMER_GROUPS, SHARE_GROUPS)


def require(versions: _Advertised, feature: BrokerFeature) -> None:
    """Raise :class:`BrokerFeatureError` unless ``versions``' broker has ``feature``."""
    lo_hi = versions.ranges.get(feature.api_key)
    has = lo_hi is not None and lo_hi[1] >= feature.min_version
    if has and feature.feature is not None and versions.feature_level("metadata.version") > 0:
        has = versions.feature_level(feature.feature) >= 1
    if not has:
        raise BrokerFeatureError(feature.name, broker_release(versions), feature.needs())
