"""A local SparkSession for the whole test session (the ``spark`` marker's tests)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """local[2], small and quick to start; skipped without pyspark or Java."""
    pytest.importorskip("pyspark.sql")
    from pykaf.testing import local_spark_session

    try:
        session = local_spark_session("pykaf-tests")
    except Exception as exc:  # no Java, or the JVM did not start
        pytest.skip(f"no local Spark: {exc}")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def cluster(spark: Any) -> Iterator[Any]:
    """A fake cluster the Spark workers produce to (served from a thread of this process).

    The ``pykaf`` format is not registered by hand: PySpark finds ``pyspark_pykaf``.
    """
    from pykaf.testing import FakeClusterThread

    with FakeClusterThread(1) as fake:
        yield fake


@pytest.fixture
def new_topic(cluster: Any) -> Callable[[int], str]:
    """Make a topic of that many partitions on ``cluster``; return its name."""

    def make(partitions: int = 3) -> str:
        name = f"spark-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(name, partitions)
        return name

    return make


@dataclass
class Kafka:
    """A broker the Spark tests run against: its name, bootstrap and a topic maker."""

    name: str
    bootstrap: str
    create: Callable[[str, int], None]

    def topic(self, partitions: int = 3) -> str:
        """A new topic of ``partitions`` partitions; its name."""
        name = f"spark-{uuid.uuid4().hex[:8]}"
        self.create(name, partitions)
        return name


@pytest.fixture(params=["kafka", "fake"])
def kafka(request: pytest.FixtureRequest, cluster: Any) -> Kafka:
    """The session's Apache Kafka, then the session's fake cluster (the ``pykaf`` format
    registered)."""
    if request.param == "fake":
        return Kafka("fake", cluster.bootstrap, lambda t, n: cluster.create_topic(t, n))
    real = request.getfixturevalue("kafka_cluster")
    return Kafka("kafka", real.bootstrap, lambda t, n: real.create_topic(t, n))


@pytest.fixture(scope="session")
def spark_kafka_connector(spark: Any) -> list[str]:
    """Spark's own Kafka connector (``format("kafka")``) loaded into the session's ``spark``.

    The jars (:func:`pykaf.testing._kafka_dist.spark_kafka_jars`: the
    connector and what PySpark lacks) are fetched with Maven on first use and
    added with ``ADD JAR``; their paths are returned. No Java or Maven, or a
    failed fetch, fails the test that asks for it, saying why.
    """
    from pykaf.testing._kafka_dist import KafkaUnavailableError, spark_kafka_jars

    try:
        jars = [str(jar) for jar in spark_kafka_jars()]
    except KafkaUnavailableError as exc:
        pytest.fail(f"Spark's Kafka connector is unavailable: {exc}")
    for jar in jars:
        spark.sql(f"ADD JAR '{jar}'")
    return jars
