"""The ``pykaf`` data source: ``df.write.format("pykaf")`` (batch write, for now).

Option names follow Spark's built-in Kafka connector, so a job ports by
changing the format name: ``kafka.bootstrap.servers`` (required), ``topic``
(or a ``topic`` column), and ``kafka.*`` producer settings. Reading (batch
and streaming) is not built yet.

Rows: ``value`` (binary or string) is required; ``key`` (binary or string),
``topic`` (string) and ``partition`` (int) are optional; a null topic takes
the ``topic`` option, a null partition leaves it to the partitioner. Each
Arrow batch is split by topic and partition and handed to the producer's
bulk path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from pykaf import errors
from pykaf.spark._producer import get_producer

#: The columns of Spark's Kafka source, which reading will give (DDL).
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)

# kafka.* options -> (pykaf producer option, conversion)
_KAFKA_OPTIONS: dict[str, tuple[str, Any]] = {
    "acks": ("acks", lambda v: v if v == "all" else int(v)),
    "linger.ms": ("linger", lambda v: int(v) / 1000),
    "batch.size": ("batch_bytes", int),
    "compression.type": ("compression", str),
    "enable.idempotence": ("idempotence", lambda v: v.lower() == "true"),
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout", lambda v: int(v) / 1000),
    "delivery.timeout.ms": ("delivery_timeout", lambda v: int(v) / 1000),
    "max.request.size": ("max_message_bytes", int),
    "retries": ("retries", int),
}


def producer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """Pykaf producer options from the data source's ``kafka.*`` options.

    Raises:
        ConfigError: ``kafka.bootstrap.servers`` is missing, or a ``kafka.*``
            option is one pykaf does not take (named, with those it does).
    """
    config: dict[str, Any] = {}
    unknown = []
    for name, value in options.items():
        if not name.lower().startswith("kafka."):
            continue
        key = name[len("kafka.") :]
        if key == "bootstrap.servers":
            config["bootstrap_servers"] = value
        elif key in _KAFKA_OPTIONS:
            target, convert = _KAFKA_OPTIONS[key]
            try:
                config[target] = convert(value)
            except ValueError:
                raise errors.ConfigError(f"option {name}={value!r} is not valid") from None
        else:
            unknown.append(name)
    if unknown:
        known = ", ".join(f"kafka.{k}" for k in ["bootstrap.servers", *_KAFKA_OPTIONS])
        raise errors.ConfigError(f"unsupported option(s) {', '.join(unknown)}; pykaf takes {known}")
    if "bootstrap_servers" not in config:
        raise errors.ConfigError("the option kafka.bootstrap.servers is required")
    return config


@dataclass
class PykafCommitMessage(WriterCommitMessage):
    """What one write task reports: the records it produced."""

    records: int


class PykafWriter(DataSourceArrowWriter):
    """Batch write: every task produces its rows and flushes; a failed record fails it."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.config = producer_config(options)
        self.topic = options.get("topic")

    def write(self, iterator: Iterator[Any]) -> PykafCommitMessage:
        """Produce the task's batches, wait for every acknowledgement."""
        import pyarrow as pa
        import pyarrow.compute as pc

        producer = get_producer(**self.config)
        records = 0
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            names = batch.schema.names
            if "value" not in names:
                raise errors.ConfigError(f"no 'value' column to write (columns: {names})")
            table = pa.Table.from_batches([batch])
            groups = [c for c in ("topic", "partition") if c in names]
            if "topic" not in names and self.topic is None:
                raise errors.ConfigError("no 'topic' option and no 'topic' column")
            if not groups:
                records += self._send(producer, table, self.topic, None)
                continue
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
                part = table.filter(mask)
                topic = row.get("topic") or self.topic
                if topic is None:
                    raise errors.ConfigError(
                        "a row has a null topic and there is no 'topic' option"
                    )
                records += self._send(producer, part, topic, row.get("partition"))
        producer.flush()
        return PykafCommitMessage(records)

    @staticmethod
    def _send(producer: Any, table: Any, topic: str | None, partition: int | None) -> int:
        assert topic is not None
        values = table["value"].combine_chunks()
        keys = table["key"].combine_chunks() if "key" in table.column_names else None
        sent: int = producer.send_many(topic, values, keys=keys, partition=partition)
        return sent

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task's records are acknowledged before it ends."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo (records acknowledged stay written); never raises."""


class PykafDataSource(DataSource):
    """The ``pykaf`` format: ``df.write.format("pykaf").option(...).save()``."""

    @classmethod
    def name(cls) -> str:
        """The format name (Spark's own connector has "kafka")."""
        return "pykaf"

    def schema(self) -> str:
        """The columns a read gives (Spark's Kafka source's)."""
        return KAFKA_SCHEMA

    def writer(self, schema: Any, overwrite: bool) -> PykafWriter:
        """Batch write; ``overwrite`` is refused (a topic is only appended to)."""
        if overwrite:
            raise errors.ConfigError("a Kafka topic can only be appended to: use mode('append')")
        return PykafWriter(self.options)


def register(spark: Any) -> None:
    """Register the ``pykaf`` format with a SparkSession."""
    spark.dataSource.register(PykafDataSource)
