"""Producing from Spark tasks: one producer per Python worker, and a ``mapInArrow`` function.

Spark runs a task's Python code in a worker process it reuses for later
tasks (``spark.python.worker.reuse``, on by default). :func:`get_producer`
keeps one :class:`pykaf.sync.Producer` per worker process and configuration,
so tasks share its connections; a process forked from one that had a
producer gets its own. Workers end with ``os._exit``: nothing runs at exit,
so every task must flush before it ends (:func:`arrow_producer` does).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pykaf import errors
from pykaf.sync import Producer

SUMMARY_SCHEMA = (
    "topic string, records long, value_bytes long, seconds double, pid int, reused boolean"
)
"""The schema of the rows :func:`arrow_producer` yields, one per task.

As ``df.mapInArrow`` wants it: a DDL string.
"""

_lock = threading.Lock()
_producers: dict[tuple[int, tuple[tuple[str, str], ...]], Producer] = {}
_used: set[int] = set()  # ids of producers a task already used


def _key(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(value)) for name, value in config.items()))


def get_producer(**config: Any) -> Producer:
    """The worker process's producer for ``config`` (made on first use, then reused).

    ``config`` holds :class:`pykaf.sync.Producer`'s arguments:
    ``bootstrap_servers`` and any producer option. Equal configurations share
    one producer per process; after ``os.fork()`` the child makes its own.

    Per row, use its :meth:`~pykaf.sync.Producer.produce` (records are staged
    in the task's thread, no hop to the producer's loop per row) and call
    ``flush()`` before the task returns, e.g. in ``foreachPartition``::

        def send_rows(rows):
            producer = get_producer(bootstrap_servers="host:9092")
            for row in rows:
                producer.produce("orders", row.value, key=row.key)
            producer.flush()

    Raises:
        ConfigError: an option is invalid (raised when the producer is made).
    """
    key = (os.getpid(), _key(config))
    with _lock:
        producer = _producers.get(key)
        if producer is None or producer.closed:
            producer = Producer(**config)
            _producers[key] = producer
        return producer


def _column(batch: Any, name: str | None) -> Any:
    if name is None:
        return None
    try:
        return batch.column(name)
    except KeyError:
        names = ", ".join(batch.schema.names)
        raise errors.ConfigError(f"no column {name!r} in the batch (columns: {names})") from None


def arrow_producer(
    topic: str,
    *,
    value_column: str = "value",
    key_column: str | None = None,
    flush_timeout: float | None = None,
    **config: Any,
) -> ArrowProducer:
    """A function for ``df.mapInArrow`` that produces every row of the task to ``topic``.

    Each Arrow record batch goes to the producer's bulk path whole (the
    columns' buffers are encoded in Cython, with no Python object per row).
    Once the task's batches are all sent, the function waits until every
    record is acknowledged and yields one summary row (:data:`SUMMARY_SCHEMA`);
    if any record failed it raises, which fails the task (and Spark retries it:
    records acknowledged before the failure are then written again).

    Use it as::

        summary = df.mapInArrow(
            arrow_producer("events", bootstrap_servers="host:9092", key_column="id"),
            SUMMARY_SCHEMA,
        ).collect()

    Args:
        topic: where to produce.
        value_column: the column of values (binary or string; nulls allowed).
        key_column: the column of keys, or None for no keys.
        flush_timeout: seconds each task waits for its acknowledgements (None:
            the producer's delivery timeout bounds it).
        **config: :func:`get_producer`'s configuration.

    Raises:
        ConfigError: a named column is missing (when the task runs).
        DeliveryError: records failed (when the task runs).
    """
    return ArrowProducer(topic, value_column, key_column, flush_timeout, config)


def _first_use(producer: Producer) -> bool:
    """Whether no task of this process used ``producer`` before (and note that one did)."""
    with _lock:
        first = id(producer) not in _used
        _used.add(id(producer))
    return first


class ArrowProducer:
    """What :func:`arrow_producer` returns: picklable, and light to ship to every task.

    Spark pickles the function given to ``mapInArrow`` for each task; an
    instance of this module-level class is pickled as a reference to the
    class plus its few attributes, so in the worker it runs against this
    module's real state (the per-process producers), not a copy.
    """

    def __init__(
        self,
        topic: str,
        value_column: str,
        key_column: str | None,
        flush_timeout: float | None,
        config: dict[str, Any],
    ) -> None:
        self.topic = topic
        self.value_column = value_column
        self.key_column = key_column
        self.flush_timeout = flush_timeout
        self.config = config

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Produce the task's batches, wait for them, yield the summary row."""
        import pyarrow as pa

        topic, timeout = self.topic, self.flush_timeout
        producer = get_producer(**self.config)
        reused = not _first_use(producer)
        started = time.monotonic()
        records = value_bytes = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            values = _column(batch, self.value_column)
            keys = _column(batch, self.key_column)
            records += producer.send_many(topic, values, keys=keys, timeout=timeout)
            value_bytes += values.nbytes
        producer.flush(timeout=timeout)
        yield pa.RecordBatch.from_pydict(
            {
                "topic": [topic],
                "records": [records],
                "value_bytes": [value_bytes],
                "seconds": [time.monotonic() - started],
                "pid": [os.getpid()],
                "reused": [reused],
            },
            schema=_summary_schema(),
        )


def _summary_schema() -> Any:
    """The Arrow schema of :data:`SUMMARY_SCHEMA` (pyarrow is imported on use)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("records", pa.int64()),
            ("value_bytes", pa.int64()),
            ("seconds", pa.float64()),
            ("pid", pa.int32()),
            ("reused", pa.bool_()),
        ]
    )
