"""``pykaf.sync.ShareConsumer``: a share group consumer for scripts and threads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

from pykaf._config import bootstrap_argument
from pykaf._share.consumer import ShareConsumer as AsyncShareConsumer
from pykaf._share.opener import open_share_consumer
from pykaf._share.records import ACCEPT, AcknowledgeType, ShareRecord
from pykaf._sync.hosted import Hosted
from pykaf.errors import ClosedError

__all__ = ["ShareConsumer"]


class ShareConsumer(Hosted):
    """A blocking share consumer: :func:`pykaf.open_share_consumer` for scripts and threads.

    ::

        with pykaf.sync.ShareConsumer("localhost:9092", "workers", ["jobs"]) as consumer:
            for record in consumer:            # accepted when the next is asked for
                if not handle(record):
                    consumer.acknowledge(record, pykaf.RELEASE)

    Methods are the async consumer's, run in the process's portal loop; one
    thread at a time should use it (calls are serialised by a lock).

    Args:
        bootstrap_servers: ``"host:port,..."`` or a list of ``"host:port"``.
        group_id: the share group.
        topics: the topic names to consume.
        **config: options of :class:`pykaf.ShareConsumerConfig`.

    Raises:
        ConfigError: an invalid option.
        KafkaConnectionError: no broker could be reached.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        topics: Sequence[str],
        **config: Any,
    ) -> None:
        servers = bootstrap_argument(bootstrap_servers)
        self._consumer: AsyncShareConsumer = self._host(
            partial(open_share_consumer, servers, group_id, topics, **config)
        )

    def _run(self, method: Any, *args: Any, timeout: float | None = None) -> Any:
        self._portal.check_caller()
        if self._closed:
            raise ClosedError("the share consumer is closed")
        with self._lock:
            return self._portal.run(partial(method, *args), timeout=timeout)

    @property
    def member_id(self) -> str:
        """The member id."""
        return self._consumer.member_id

    @property
    def assignment(self) -> frozenset[tuple[str, int]]:
        """The partitions the coordinator assigned this member."""
        return self._consumer.assignment

    def next_batch(self, timeout: float | None = None) -> list[ShareRecord]:
        """The next records acquired (empty after ``timeout`` seconds).

        See :meth:`pykaf.ShareConsumer.next_batch`.
        """
        batch: list[ShareRecord] = self._run(self._consumer.next_batch, timeout)
        return batch

    def poll(self, timeout: float | None = None) -> ShareRecord | None:
        """The next record (from the current batch, else a new one); None after ``timeout``."""
        record: ShareRecord | None = self._run(self._consumer.next_record, timeout)
        return record

    def __iter__(self) -> Iterator[ShareRecord]:
        while not self._closed:
            record = self.poll()
            if record is not None:
                yield record

    def acknowledge(self, record: ShareRecord, outcome: AcknowledgeType = ACCEPT) -> None:
        """Record ``outcome`` for ``record`` (sent with the next fetch or :meth:`commit`)."""
        self._run_sync(self._consumer.acknowledge, record, outcome)

    def _run_sync(self, fn: Any, *args: Any) -> Any:
        self._portal.check_caller()
        if self._closed:
            raise ClosedError("the share consumer is closed")
        return self._portal.run_sync(fn, *args)

    def commit(self, timeout: float | None = None) -> None:
        """Accept what was handed out and not acknowledged, and send every outcome now."""
        self._run(self._consumer.commit, timeout=timeout)

    _name = "pykaf.sync.ShareConsumer"

    def close(self, timeout: float | None = None) -> None:
        """Settle what was handed out and leave the group. Idempotent."""
        super().close(timeout)
