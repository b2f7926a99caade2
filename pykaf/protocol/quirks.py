"""Every workaround pykaf carries for a broker that departs from Apache Kafka, with its reason.

pykaf is tested on Apache Kafka, on Tansu (an independent broker in Rust) and
on librdkafka's mock cluster. Where one of the latter two answers differently
from Kafka, pykaf bends as little as it can, and only here or at a line that
names its entry of :data:`QUIRKS` in a ``# quirk: <name>`` comment. The test
``tests/protocol/test_quirks.py`` holds the two together: every tag names an
entry, every entry is used, and no library module speaks of Tansu or the mock
without a tag.

The data the workarounds need (the mock's cluster id, its version caps, the
shortest Fetch wait Tansu answers) is defined here too, so that each is
written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykaf.protocol._messages.describe_groups import DescribeGroupsRequest
from pykaf.protocol._messages.list_groups import ListGroupsRequest
from pykaf.protocol._messages.offset_commit import OffsetCommitRequest
from pykaf.protocol.versions import VersionCap


@dataclass(frozen=True)
class Quirk:
    """One broker's departure from Kafka, and what pykaf does about it."""

    broker: str
    departure: str
    workaround: str


#: Every workaround, by the name its call sites give in ``# quirk:`` comments.
QUIRKS: dict[str, Quirk] = {
    "mock-api-versions-body": Quirk(
        "librdkafka mock",
        "rejects an ApiVersions version it does not speak with a body v0 cannot parse",
        "an unparsable rejection is read as UNSUPPORTED_VERSION with no ranges; pykaf "
        "asks again with v0",
    ),
    "mock-null-fields": Quirk(
        "librdkafka mock",
        "sends null in fields whose version does not allow null",
        "the decoders read such a null as the field type's default (Kafka's Java client "
        "would refuse it)",
    ),
    "mock-flexible-group-calls": Quirk(
        "librdkafka mock",
        "advertises JoinGroup v6 and SyncGroup v4 but drops the connection on them, and "
        "answers LeaveGroup v3 in the v2 layout",
        "the classic group calls stop at the last versions before the flexible encoding "
        "(the caps in pykaf.protocol.versions, which librdkafka itself sends)",
    ),
    "mock-admin-flexible-versions": Quirk(
        "librdkafka mock",
        "mis-parses the flexible forms of OffsetCommit, DescribeGroups and ListGroups",
        "the admin client caps them (MOCK_CAPS) on a cluster whose id starts with "
        "MOCK_CLUSTER_ID_PREFIX, and only there",
    ),
    "mock-late-sync-refused": Quirk(
        "librdkafka mock",
        "ends a generation as soon as the leader's SyncGroup carries every assignment, "
        "and refuses a later follower's SyncGroup as INVALID_REQUEST",
        "the member joins again (as librdkafka does); a refusal that repeats twice is "
        "raised as a real malformed request",
    ),
    "bump-refused": Quirk(
        "librdkafka mock, Tansu",
        "refuse a KIP-360 epoch bump: the mock with INVALID_PRODUCER_ID_MAPPING, Tansu "
        "with UNKNOWN_SERVER_ERROR",
        "the producer asks for a new producer id instead (Kafka gives an idempotent "
        "producer a new id on a bump anyway)",
    ),
    "tansu-latest-offset": Quirk(
        "Tansu",
        "answers ListOffsets(latest) with an offset inside the log's last batch once "
        "batches hold more than one record",
        "a partition's end is the larger of ListOffsets' answer and the high watermark "
        "(or last stable offset) of a Fetch from there",
    ),
    "tansu-fetch-zero-wait": Quirk(
        "Tansu",
        "never answers a Fetch whose max wait is 0",
        "a Fetch that must not wait waits TANSU_MIN_FETCH_WAIT instead",
    ),
    "tansu-offset-fetch-all": Quirk(
        "Tansu",
        "garbles 'all topics' in OffsetFetch's single-group form (v7 and below)",
        "the admin client asks in the groups form (v8+) when the broker speaks it",
    ),
    "answered-acks-zero": Quirk(
        "Tansu, librdkafka mock",
        "answer Produce requests sent with acks=0, which Kafka never answers",
        "a connection remembers the correlation ids of its latest acks=0 requests and "
        "drops an answer to one instead of breaking the connection; after acks=0 "
        "requests it closes gracefully (half-close, read until the broker closes), so "
        "that unread answers do not turn the close into a reset that loses requests",
    ),
    "tansu-consumer-group-describe": Quirk(
        "Tansu",
        "answers ConsumerGroupDescribe for every group id (classic ones and unknown ones) "
        "as an Empty group with epoch -1, though it has no ConsumerGroupHeartbeat",
        "the admin client asks ConsumerGroupDescribe only of a coordinator that also "
        "speaks ConsumerGroupHeartbeat (no other can hold a consumer-protocol group)",
    ),
    "mock-heartbeat-both-subscriptions": Quirk(
        "librdkafka mock",
        "aborts the whole process (a failed assertion) on a ConsumerGroupHeartbeat that "
        "carries SubscribedTopicNames without SubscribedTopicRegex, or the reverse",
        "a consumer-protocol member sends both, the unused one empty (an empty list, or "
        '"", which Kafka reads as no regular expression), as librdkafka does',
    ),
}

#: librdkafka's mock cluster names its clusters "mockCluster<...>".
MOCK_CLUSTER_ID_PREFIX = "mockCluster"

#: The admin client's caps on librdkafka's mock only (``mock-admin-flexible-versions``):
#: the last versions before the flexible encoding. Other brokers get what
#: ApiVersions offers (ListGroups v4+ carries each group's state).
MOCK_CAPS: dict[int, VersionCap] = {
    cap.api_key: cap
    for cap in (
        VersionCap(OffsetCommitRequest.API_KEY, 8, "librdkafka's mock mis-parses v9+"),
        VersionCap(DescribeGroupsRequest.API_KEY, 4, "librdkafka's mock mis-parses v5+"),
        VersionCap(ListGroupsRequest.API_KEY, 2, "librdkafka's mock mis-parses v3+"),
    )
}

#: The shortest Fetch max wait (seconds) for a Fetch that should not wait
#: (``tansu-fetch-zero-wait``).
TANSU_MIN_FETCH_WAIT = 0.01


def is_librdkafka_mock(cluster_id: str | None) -> bool:
    """Whether ``cluster_id`` is one librdkafka's mock cluster gives itself."""
    return (cluster_id or "").startswith(MOCK_CLUSTER_ID_PREFIX)
