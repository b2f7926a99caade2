"""Writing for the ``pykaf`` data source: batch (``df.write``) and streaming (``df.writeStream``).

Rows: ``value`` (binary or string) is required; ``key`` (binary or string),
``topic`` (string), ``partition`` (int), ``headers`` (array of struct<key
string, value binary>) and ``timestamp`` (timestamp, pykaf's addition) are
optional; other columns are ignored. The types are checked when the write is
planned (:func:`check_write_schema`). The ``topic`` option, when given,
overrides the ``topic`` column (as in Spark's Kafka sink); a null partition
leaves it to the partitioner. Each Arrow batch is split by topic and
partition and each part goes to the producer's bulk path whole; up to
:data:`PIPELINE` parts are in flight at once, and a task ends only when every
record is acknowledged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from pykaf import errors
from pykaf._sync.portal import wait_future
from pykaf.spark._options import check_option_names, producer_config
from pykaf.spark._producer import get_producer

#: Parts of batches a task keeps in flight before it waits for the oldest.
PIPELINE = 4

#: The columns a write takes, and the Spark types each may have (Spark's Kafka
#: sink's; ``timestamp`` is pykaf's addition). Other columns are ignored.
_COLUMN_TYPES: dict[str, tuple[str, ...]] = {
    "key": ("string", "binary"),
    "value": ("string", "binary"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
    "timestamp": ("timestamp", "timestamp_ntz"),
}


def check_write_schema(schema: Any, topic: str | None) -> None:
    """Refuse, when the write is planned, a DataFrame the sink cannot write.

    ``value`` must be there; ``key``, ``value``, ``topic``, ``partition``,
    ``headers`` and ``timestamp`` must have the types of
    :data:`_COLUMN_TYPES` (nullability does not matter); without a ``topic``
    option there must be a ``topic`` column. Other columns are ignored, as
    Spark's Kafka sink ignores them.

    Raises:
        ConfigError: naming the column, its type and the types allowed.
    """
    fields = {field.name: field.dataType for field in schema.fields}
    if "value" not in fields:
        raise errors.ConfigError(f"no 'value' column to write (columns: {sorted(fields)})")
    if topic is None and "topic" not in fields:
        raise errors.ConfigError("no 'topic' option and no 'topic' column")
    for name, allowed in _COLUMN_TYPES.items():
        if name not in fields:
            continue
        got = _type_name(fields[name])
        if got not in allowed:
            raise errors.ConfigError(f"column {name!r} must be {' or '.join(allowed)}, not {got}")


def _type_name(data_type: Any) -> str:
    """A Spark type as in :data:`_COLUMN_TYPES` (nullability left out)."""
    from pyspark.sql.types import ArrayType, StructType

    if isinstance(data_type, ArrayType):
        return f"array<{_type_name(data_type.elementType)}>"
    if isinstance(data_type, StructType):
        inner = ",".join(f"{f.name}:{_type_name(f.dataType)}" for f in data_type.fields)
        return f"struct<{inner}>"
    name: str = data_type.simpleString()
    return "int" if name == "integer" else name


@dataclass
class PykafCommitMessage(WriterCommitMessage):
    """What one write task reports: the records it produced."""

    records: int


class _TaskWriter:
    """Produces one task's batches: split by topic and partition, pipelined."""

    def __init__(self, config: dict[str, Any], topic: str | None) -> None:
        self.producer = get_producer(**config)
        self.topic = topic
        self.pending: deque[Future[int]] = deque()
        self.records = 0

    def write(self, batches: Iterator[Any]) -> int:
        try:
            for batch in batches:
                if batch.num_rows:
                    self._batch(batch)
            while self.pending:
                self.records += wait_future(self.pending.popleft())
        finally:
            # Never leave this task's records behind in the worker's buffer
            # (a later task must not inherit them), even when failing.
            for future in self.pending:
                future.exception()
        return self.records

    def _batch(self, batch: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        names = set(batch.schema.names) & set(_COLUMN_TYPES)  # others are ignored
        if "value" not in names:
            raise errors.ConfigError("no 'value' column to write")
        if "topic" not in names and self.topic is None:
            raise errors.ConfigError("no 'topic' option and no 'topic' column")
        table = pa.Table.from_batches([batch]).select([n for n in batch.schema.names if n in names])
        # The topic option overrides a topic column, as in Spark's Kafka sink.
        groups = [c for c in ("topic", "partition") if c in names]
        if self.topic is not None and "topic" in groups:
            groups.remove("topic")
        if not groups:
            self._send(table, self.topic, None)
            return
        keys = table.select(groups).group_by(groups).aggregate([])
        for row in keys.to_pylist():
            mask = None
            for column in groups:
                # A null cell is its own group (equal() would give null and drop it).
                cond = (
                    pc.is_null(table[column])
                    if row[column] is None
                    else pc.equal(table[column], row[column])
                )
                mask = cond if mask is None else pc.and_(mask, cond)
            topic = self.topic or row.get("topic")
            if topic is None:
                raise errors.ConfigError("a row has a null topic and there is no 'topic' option")
            self._send(table.filter(mask), topic, row.get("partition"))

    def _send(self, table: Any, topic: str | None, partition: int | None) -> None:
        assert topic is not None
        names = table.column_names
        values = table["value"].combine_chunks()
        keys = table["key"].combine_chunks() if "key" in names else None
        headers = _headers(table["headers"]) if "headers" in names else None
        timestamps = _timestamps(table["timestamp"]) if "timestamp" in names else None
        while len(self.pending) >= PIPELINE:
            self.records += wait_future(self.pending.popleft())
        self.pending.append(
            self.producer.send_many_async(
                topic,
                values,
                keys=keys,
                headers=headers,
                timestamps=timestamps,
                partition=partition,
            )
        )


def _headers(column: Any) -> list[list[tuple[str, bytes | None]] | None]:
    """Spark's headers (array<struct<key, value>>) as the producer takes them."""
    out: list[list[tuple[str, bytes | None]] | None] = []
    for cell in column.to_pylist():
        if cell is None:
            out.append(None)
            continue
        pairs = []
        for header in cell:
            if header is None or header.get("key") is None:
                raise errors.ConfigError("a header has no key")
            value = header.get("value")
            if isinstance(value, str):
                value = value.encode()
            pairs.append((header["key"], value))
        out.append(pairs)
    return out


def _timestamps(column: Any) -> list[int | None]:
    """A timestamp column as milliseconds since the epoch (null: the producer's now)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks()
    if not pa.types.is_timestamp(array.type):
        raise errors.ConfigError(f"column 'timestamp' must be a timestamp, not {array.type}")
    millis = pc.cast(pc.cast(array, pa.timestamp("ms", tz=array.type.tz)), pa.int64())
    values: list[int | None] = millis.to_pylist()
    return values


class PykafWriter(DataSourceArrowWriter):
    """Batch write: every task produces its rows and waits; a failed record fails it.

    Options and the DataFrame's columns are checked when the write is planned.
    """

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        check_option_names(options)
        self.config = producer_config(options)
        self.topic = options.get("topic")
        check_write_schema(schema, self.topic)

    def write(self, iterator: Iterator[Any]) -> PykafCommitMessage:
        """Produce the task's batches, wait for every acknowledgement."""
        return PykafCommitMessage(_TaskWriter(self.config, self.topic).write(iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task's records are acknowledged before it ends."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo (records acknowledged stay written); never raises."""


class PykafStreamWriter(DataSourceStreamArrowWriter):
    """Streaming write: each micro-batch's tasks produce and wait, as the batch writer's.

    Delivery is at least once: a micro-batch Spark runs again after a failure
    writes its records again.
    """

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        check_option_names(options)
        self.config = producer_config(options)
        self.topic = options.get("topic")
        check_write_schema(schema, self.topic)

    def write(self, iterator: Iterator[Any]) -> PykafCommitMessage:
        """Produce the task's batches, wait for every acknowledgement."""
        return PykafCommitMessage(_TaskWriter(self.config, self.topic).write(iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task's records are acknowledged before it ends."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo; never raises."""
