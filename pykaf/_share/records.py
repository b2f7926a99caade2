"""Share records, their acknowledgement outcomes, and the outcomes waiting to be sent.

A share group's broker hands records out under an *acquisition lock*: each
delivered record must be acknowledged, with one of :class:`AcknowledgeType`'s
outcomes, before the lock expires, or the broker delivers it again (to this
member or another) with a higher delivery count.

:class:`ShareRecord` is a thin wrapper over the codec's
:class:`~pykaf.codec.Record` (a slotted class in Cython and its pure-Python
twin) that adds ``delivery_count``: adding a field to the codec's Record would
grow every record of every ordinary consumer for one share-only attribute.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from pykaf.codec import Record

__all__ = [
    "ACCEPT",
    "REJECT",
    "RELEASE",
    "RENEW",
    "AcknowledgeType",
    "PendingAcks",
    "ShareRecord",
    "ack_batches",
]


class AcknowledgeType(enum.IntEnum):
    """How a share consumer settles a delivered record (KIP-932's wire codes).

    ACCEPT: processed; never delivered again. RELEASE: not processed; delivered
    again (to any member) with a higher delivery count. REJECT: unprocessable;
    archived, never delivered again. RENEW (KIP-1222, ShareFetch and
    ShareAcknowledge v2, Kafka 4.2+): still being processed; the acquisition
    lock starts again and the record must still be settled later.
    """

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


ACCEPT = AcknowledgeType.ACCEPT
"""``AcknowledgeType.ACCEPT``: the record was processed."""
RELEASE = AcknowledgeType.RELEASE
"""``AcknowledgeType.RELEASE``: give the record back for another delivery."""
REJECT = AcknowledgeType.REJECT
"""``AcknowledgeType.REJECT``: the record cannot be processed; never deliver it again."""
RENEW = AcknowledgeType.RENEW
"""``AcknowledgeType.RENEW``: still being processed; extend the acquisition lock."""
#: The wire code of an offset the broker acquired but sent no record for (a control record).
GAP = 0


class ShareRecord:
    """A record delivered by a share group, with how many times it has been delivered.

    The record's fields (``topic``, ``partition``, ``offset``, ``key``,
    ``value``, ``headers``, ``timestamp``, ``timestamp_type``) read through to
    the decoded :class:`~pykaf.codec.Record` (``record``).
    """

    __slots__ = ("acknowledged", "delivery_count", "record")

    def __init__(self, record: Record, delivery_count: int) -> None:
        self.record = record
        #: 1 on the first delivery; each redelivery (release, lock expiry) adds one.
        self.delivery_count = delivery_count
        #: The outcome this consumer recorded for this delivery: None until it is
        #: acknowledged, explicitly or (ACCEPT) implicitly; RENEW while renewed.
        self.acknowledged: AcknowledgeType | None = None

    @property
    def topic(self) -> str:
        """The record's topic."""
        topic = self.record.topic
        assert topic is not None  # decoded with its topic
        return topic

    @property
    def partition(self) -> int:
        """The record's partition."""
        return int(self.record.partition)

    @property
    def offset(self) -> int:
        """The record's offset in its partition."""
        return int(self.record.offset)

    @property
    def key(self) -> bytes | None:
        """The record's key."""
        return self.record.key

    @property
    def value(self) -> bytes | None:
        """The record's value."""
        return self.record.value

    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        """The record's headers."""
        return self.record.headers

    @property
    def timestamp(self) -> int:
        """The record's timestamp, milliseconds since the epoch."""
        return int(self.record.timestamp)

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return int(self.record.timestamp_type)

    def __repr__(self) -> str:
        return (
            f"ShareRecord(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, delivery_count={self.delivery_count}, "
            f"key={self.key!r}, value={self.value!r})"
        )


TopicPartition = tuple[str, int]


class PendingAcks:
    """Outcomes recorded but not sent yet, by partition and offset (a later one wins)."""

    def __init__(self) -> None:
        self._by_partition: dict[TopicPartition, dict[int, int]] = {}

    def add(self, tp: TopicPartition, offset: int, outcome: int) -> None:
        """Record ``outcome`` for ``offset`` of ``tp``."""
        self._by_partition.setdefault(tp, {})[offset] = outcome

    def get(self, tp: TopicPartition, offset: int) -> int | None:
        """The outcome waiting for ``offset`` of ``tp``, if any."""
        return self._by_partition.get(tp, {}).get(offset)

    def partitions(self) -> list[TopicPartition]:
        """Partitions with something to send."""
        return [tp for tp, acks in self._by_partition.items() if acks]

    def take(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, dict[int, int]]:
        """Remove and return the outcomes of ``tps``."""
        out: dict[TopicPartition, dict[int, int]] = {}
        for tp in tps:
            acks = self._by_partition.pop(tp, None)
            if acks:
                out[tp] = acks
        return out

    def drop(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s outcomes (its records are no longer this member's to settle)."""
        self._by_partition.pop(tp, None)

    def __len__(self) -> int:
        return sum(len(a) for a in self._by_partition.values())


def ack_batches(outcomes: dict[int, int], batch_class: Any) -> list[Any]:
    """Wire AcknowledgementBatch objects for ``{offset: outcome}``.

    Consecutive offsets form one batch; a batch whose offsets share one
    outcome sends it once, otherwise one outcome per offset (as KIP-932 allows).
    """
    out: list[Any] = []
    run: list[int] = []

    def flush() -> None:
        if not run:
            return
        types = [outcomes[o] for o in run]
        if len(set(types)) == 1:
            types = types[:1]
        out.append(batch_class(first_offset=run[0], last_offset=run[-1], acknowledge_types=types))
        run.clear()

    for offset in sorted(outcomes):
        if run and offset != run[-1] + 1:
            flush()
        run.append(offset)
    flush()
    return out
