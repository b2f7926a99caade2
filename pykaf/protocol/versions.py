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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pykaf.protocol._messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from pykaf.protocol._messages.end_txn import EndTxnRequest
from pykaf.protocol._messages.fetch import FetchRequest
from pykaf.protocol._messages.heartbeat import HeartbeatRequest
from pykaf.protocol._messages.join_group import JoinGroupRequest
from pykaf.protocol._messages.leave_group import LeaveGroupRequest
from pykaf.protocol._messages.offset_commit import OffsetCommitRequest
from pykaf.protocol._messages.offset_fetch import OffsetFetchRequest
from pykaf.protocol._messages.produce import ProduceRequest
from pykaf.protocol._messages.sync_group import SyncGroupRequest
from pykaf.protocol._messages.txn_offset_commit import TxnOffsetCommitRequest


class _Versions(Protocol):
    def version_for(self, api_key: int) -> int: ...


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
