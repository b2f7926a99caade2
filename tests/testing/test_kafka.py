"""pykaf.testing's Apache Kafka launcher: provisioning, listeners, ACLs, faults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.testing import (
    KAFKA_USERS,
    KafkaCluster,
    KafkaClusterError,
    KafkaUnavailableError,
    TLSCertificates,
    _kafka_dist,
    kafka_home,
    open_kafka_cluster,
)

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_kafka_users_come_from_pykaf_testing_without_pytest() -> None:
    """docs/testing.md names ``pykaf.testing.KAFKA_USERS``: it is there, the fixtures' own."""
    code = (
        "import sys, pykaf.testing as t; "
        "assert 'pytest' not in sys.modules; "
        "print(sorted(t.KAFKA_USERS.items()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == str(sorted(KAFKA_USERS.items()))
    import pykaf.testing
    from pykaf.testing import fixtures

    assert "KAFKA_USERS" in pykaf.testing.__all__
    assert fixtures.KAFKA_USERS is KAFKA_USERS  # the users the kafka_cluster fixture makes
    assert sorted(KAFKA_USERS) == ["admin", "alice", "bob"]


# -- provisioning -----------------------------------------------------------------


def test_a_kafka_home_without_jars_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYKAF_KAFKA_HOME", str(tmp_path))
    with pytest.raises(KafkaUnavailableError, match="holds no Kafka jars"):
        kafka_home()


def test_kafka_home_accepts_a_release_tarball_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "kafka_2.13-4.3.1.jar").write_bytes(b"")
    monkeypatch.setenv("PYKAF_KAFKA_HOME", str(tmp_path))
    assert kafka_home() == tmp_path
    assert _kafka_dist.kafka_classpath(tmp_path) == str(tmp_path / "libs" / "*")


def test_without_maven_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYKAF_KAFKA_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # an empty cache: a fetch is needed
    real_which = _kafka_dist.shutil.which
    monkeypatch.setattr(
        _kafka_dist.shutil, "which", lambda name: None if name == "mvn" else real_which(name)
    )
    with pytest.raises(KafkaUnavailableError, match="apt-get install maven"):
        kafka_home("4.3.1")


def test_without_java_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(_kafka_dist.shutil, "which", lambda name: None)
    with pytest.raises(KafkaUnavailableError, match="openjdk-17"):
        _kafka_dist.find_java()


def test_a_fetched_distribution_is_reused_and_complete() -> None:
    home = kafka_home()
    assert (home / ".pykaf-complete").exists() or os.environ.get("PYKAF_KAFKA_HOME")
    jars = {p.name for p in Path(_kafka_dist.kafka_classpath(home)[:-1]).glob("*.jar")}
    for prefix in ("kafka_2.13-", "kafka-tools-", "kafka-clients-", "log4j-core-", "slf4j-api-2"):
        assert any(j.startswith(prefix) for j in jars), prefix
    assert kafka_home() == home  # the second call finds it


def test_fetch_command_prints_the_home() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pykaf.testing", "kafka", "--fetch"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert done.stdout.strip() == str(kafka_home())


# -- releases -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["3.6.2", "2.8.1", "5.0.0", "4.4", "latest"])
def test_a_release_pykaf_cannot_run_is_refused_at_once(
    version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing may be fetched
    with pytest.raises(KafkaUnavailableError, match=version.replace(".", r"\.")):
        KafkaCluster(1, version=version)
    with pytest.raises(KafkaUnavailableError):
        kafka_home(version)
    assert list(tmp_path.iterdir()) == []


def test_the_kafka_command_refuses_an_unknown_release(capsys: pytest.CaptureFixture[str]) -> None:
    from pykaf.testing.__main__ import kafka_main

    assert kafka_main(["--version", "3.6.2"]) == 1
    assert "runs releases 3.7 to 4.4" in capsys.readouterr().err


def test_each_release_line_gets_its_logging_and_tools() -> None:
    old, new = _kafka_dist.kafka_release("3.9.1"), _kafka_dist.kafka_release("4.4.0")
    assert not old.log4j2 and new.log4j2
    assert "slf4j-reload4j" in old.pom() and "log4j-core" not in old.pom()
    assert "log4j-core" in new.pom() and "reload4j" not in new.pom()
    assert "<version>3.9.1</version>" in old.pom()
    assert not _kafka_dist.kafka_release("3.7.2").storage_features
    assert _kafka_dist.kafka_release("3.8.1").storage_features
    assert _kafka_dist.DEFAULT_KAFKA_VERSION in _kafka_dist.KAFKA_RELEASES
    assert "4.3.1" in _kafka_dist.KAFKA_RELEASES


def test_a_kafka_home_decides_the_release_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3.x jars in $PYKAF_KAFKA_HOME get 3.x config, whatever version was asked for."""
    (tmp_path / "libs").mkdir()
    for name in ("kafka_2.13-3.9.1-test.jar", "kafka_2.13-3.9.1.jar", "kafka-clients-3.9.1.jar"):
        (tmp_path / "libs" / name).write_bytes(b"")
    monkeypatch.setenv("PYKAF_KAFKA_HOME", str(tmp_path))
    monkeypatch.setenv("PYKAF_KAFKA_VERSION", "4.3.1")
    assert _kafka_dist.home_kafka_version() == "3.9.1"
    for cluster in (KafkaCluster(1), KafkaCluster(1, version="4.4.0")):
        assert cluster.release.version == "3.9.1"
        assert not cluster.release.log4j2  # log4j 1 properties, as 3.x reads
        assert cluster.version == "3.9.1"
    monkeypatch.delenv("PYKAF_KAFKA_HOME")
    assert _kafka_dist.home_kafka_version() is None
    assert KafkaCluster(1).release.version == "4.3.1"


def test_pykaf_kafka_version_picks_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYKAF_KAFKA_HOME", raising=False)
    monkeypatch.setenv("PYKAF_KAFKA_VERSION", "3.9.1")
    assert _kafka_dist.default_kafka_version() == "3.9.1"
    assert KafkaCluster(1).release.version == "3.9.1"
    monkeypatch.delenv("PYKAF_KAFKA_VERSION")
    assert KafkaCluster(1).release.version == _kafka_dist.DEFAULT_KAFKA_VERSION


def test_feature_levels_on_a_release_whose_tool_lacks_them_are_refused_at_once() -> None:
    with pytest.raises(KafkaClusterError, match=r"--feature from Kafka 3\.8"):
        KafkaCluster(1, version="3.7.2", features={"transaction.version": 1})


def test_a_3x_node_gets_only_the_settings_it_knows(tmp_path: Path) -> None:
    from pykaf.testing._kafka import _Node

    cluster = KafkaCluster(1, version="3.9.1", directory=tmp_path)
    cluster._directory = tmp_path
    node = _Node(1, tmp_path / "node-1", {"PLAINTEXT": 1, "INTERNAL": 2, "CONTROLLER": 3})
    cluster._nodes[1] = node
    old = cluster._properties(node)
    assert "group.share." not in old and "share.coordinator" not in old
    assert "unclean.leader.election.interval.ms" not in old
    assert "group.consumer.heartbeat.interval.ms=1000" in old
    assert "log.initial.task.delay.ms=0" in old
    cluster37 = KafkaCluster(1, version="3.7.2", directory=tmp_path)
    cluster37._directory = tmp_path
    cluster37._nodes[1] = node
    assert "log.initial.task.delay.ms" not in cluster37._properties(node)
    cluster4 = KafkaCluster(1, version="4.4.0", directory=tmp_path)
    cluster4._directory = tmp_path
    cluster4._nodes[1] = node
    new = cluster4._properties(node)
    assert "group.share.heartbeat.interval.ms=1000" in new
    assert "unclean.leader.election.interval.ms=1000" in new
    assert "log.initial.task.delay.ms=0" in new


def test_a_node_that_cannot_read_its_logging_config_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What Kafka 3.9 did with the 4.x config it was given: it ran, logging
    # nothing, so its start was only noticed failing at the start timeout.
    from pykaf.testing import _kafka

    monkeypatch.setattr(
        _kafka,
        "_LOG4J2",
        "Configuration:\n  Loggers:\n    Root:\n      level: INFO\n"
        "      AppenderRef:\n        - ref: NOWHERE\n",
    )
    cluster = KafkaCluster(1, start_timeout=600)
    with pytest.raises(KafkaClusterError, match="cannot read its logging config") as info:
        cluster.start()
    assert "NOWHERE" in str(info.value)
    cluster.close()
    assert not cluster.running(1)


# -- the session's cluster -------------------------------------------------------------


def test_the_cluster_serves_pykaf_on_plaintext(kafka_cluster: KafkaCluster) -> None:
    topic = f"launcher-{os.getpid()}"
    kafka_cluster.create_topic(topic, 3)
    with pykaf.sync.Admin(kafka_cluster.bootstrap) as admin:
        described = admin.describe_topic(topic)
        assert [p.leader for p in described.partitions] == [1, 1, 1]
        cluster = admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [1]
    assert kafka_cluster.version.startswith("4.")
    assert kafka_cluster.running(1)
    assert "Kafka Server started" in kafka_cluster.log_text(1)


def test_the_test_defaults_reach_the_broker(kafka_cluster: KafkaCluster) -> None:
    """Retention checked daily: records with old fixed create times outlive a test."""
    keys = ["log.retention.check.interval.ms", "group.initial.rebalance.delay.ms"]
    with pykaf.sync.Admin(kafka_cluster.bootstrap) as admin:
        configs = admin.describe_broker_configs([1], keys=keys)[1]
    assert configs["log.retention.check.interval.ms"].value == str(24 * 3600 * 1000)
    assert configs["group.initial.rebalance.delay.ms"].value == "0"


def test_a_topic_that_exists_is_refused(kafka_cluster: KafkaCluster) -> None:
    topic = f"launcher-twice-{os.getpid()}"
    kafka_cluster.create_topic(topic, 1)
    with pytest.raises(errors.TopicExistsError):
        kafka_cluster.create_topic(topic, 1)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_logins_succeed_and_fail(kafka_cluster: KafkaCluster, mechanism: str) -> None:
    topic = f"launcher-sasl-{mechanism.lower()}"
    kafka_cluster.create_topic(topic, 1)
    options = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    with pykaf.sync.Producer(
        kafka_cluster.sasl_bootstrap,
        sasl_username="admin",
        sasl_password=KAFKA_USERS["admin"],
        **options,
    ) as producer:
        assert producer.send(topic, b"in", partition=0).offset == 0
    with (
        pytest.raises(errors.SaslAuthenticationError, match=mechanism),
        pykaf.sync.Producer(
            kafka_cluster.sasl_bootstrap,
            sasl_username="admin",
            sasl_password="not-the-password",
            **options,
        ),
    ):
        pass


def test_tls_and_sasl_over_tls(kafka_cluster: KafkaCluster, tls_certs: TLSCertificates) -> None:
    topic = "launcher-tls"
    kafka_cluster.create_topic(topic, 1)
    with pykaf.sync.Producer(
        kafka_cluster.tls_bootstrap, security_protocol="SSL", ssl_cafile=kafka_cluster.ca_file
    ) as producer:
        producer.send(topic, b"tls", partition=0)
    with pykaf.sync.Producer(
        kafka_cluster.sasl_tls_bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=tls_certs.ca_file,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="admin",
        sasl_password=KAFKA_USERS["admin"],
    ) as producer:
        producer.send(topic, b"sasl-tls", partition=0)
    with pykaf.sync.Consumer(kafka_cluster.bootstrap) as consumer:
        consumer.assign([(topic, 0, pykaf.OLDEST)])
        assert [consumer.poll(timeout=10).value for _ in range(2)] == [b"tls", b"sasl-tls"]


def test_a_tls_client_that_does_not_trust_the_ca_is_refused(kafka_cluster: KafkaCluster) -> None:
    with (
        TLSCertificates() as other,
        # Not retried (a retried one would end as KafkaConnectionError after
        # connect_timeout): refused at the first attempt, saying why.
        pytest.raises(errors.TlsCertificateError, match="certificate verify failed"),
        pykaf.sync.Producer(
            kafka_cluster.tls_bootstrap,
            security_protocol="SSL",
            ssl_cafile=other.ca_file,  # another CA
        ),
    ):
        pass


@pytest.mark.parametrize(
    ("config", "value", "stage"),
    [
        ("num.io.threads", "zero", "formatting node 1's storage failed"),  # the formatter checks
        ("authorizer.class.name", "no.such.Authorizer", "exited with"),  # the node itself fails
    ],
)
def test_a_cluster_that_cannot_start_says_why(config: str, value: str, stage: str) -> None:
    cluster = KafkaCluster(1, broker_configs={config: value}, start_timeout=60)
    with pytest.raises(KafkaClusterError, match=stage) as info:
        cluster.start()
    assert value in str(info.value)  # the log's tail names the cause
    cluster.close()
    assert not cluster.running(1)
    assert not cluster.directory.exists()


def test_unknown_nodes_and_double_starts_are_refused(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(KafkaClusterError, match="no node 7"):
        kafka_cluster.broker_down(7)
    with pytest.raises(KafkaClusterError, match="running already"):
        kafka_cluster.broker_up(1)


# -- faults on three nodes ---------------------------------------------------------------


def test_a_node_stopped_and_started_keeps_its_data(kafka_cluster3: KafkaCluster) -> None:
    topic = "launcher-restart"
    kafka_cluster3.create_topic(topic, 3, replication_factor=3)
    # Other tests of the session may have restarted node 2 already.
    starts = kafka_cluster3.log_text(2).count("---- pykaf: start")
    with pykaf.sync.Producer(kafka_cluster3.bootstrap, acks=-1) as producer:
        for i in range(30):
            producer.send(topic, b"%d" % i, partition=i % 3)
        kafka_cluster3.broker_down(2)
        assert not kafka_cluster3.running(2)
        for i in range(30, 60):  # the other two replicas still take writes
            producer.send(topic, b"%d" % i, partition=i % 3)
        kafka_cluster3.broker_down(3, kill=True)
        kafka_cluster3.broker_up(2)
        kafka_cluster3.broker_up(3)
    assert kafka_cluster3.log_text(2).count("---- pykaf: start") == starts + 1
    with pykaf.sync.Consumer(kafka_cluster3.bootstrap) as consumer:
        consumer.assign([(topic, p, pykaf.OLDEST) for p in range(3)])
        values = sorted(int(consumer.poll(timeout=20).value) for _ in range(60))
    assert values == list(range(60))


# -- the trio form -----------------------------------------------------------------------


#: Kafka's default wait before its log tasks first run (``log.initial.task.delay.ms``)
_KAFKA_INITIAL_TASK_DELAY = 30.0


@pytest.mark.broker
@pytest.mark.slow
async def test_records_older_than_retention_outlive_the_first_half_minute() -> None:
    """Records with old create times are still there after the broker's first log tasks.

    Kafka's one retention check of a test broker used to come 30 s after its
    start: it deleted the old records of whatever test ran then, between its
    writing and its reading (a consumer's fetch was out of range, reset to an
    empty log, and nothing came).
    """
    async with open_kafka_cluster(1) as kafka:
        ready = trio.current_time()
        await kafka.create_topic("old", 1)
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            for i in range(5):
                producer.send_nowait("old", b"%d" % i, partition=0, timestamp=1_600_000_000_000 + i)
            await producer.flush()
        await trio.sleep_until(ready + _KAFKA_INITIAL_TASK_DELAY + 5)
        async with pykaf.open_consumer(kafka.bootstrap) as consumer:
            pc = await consumer.consume_partition("old", 0, pykaf.OLDEST)
            got: list[bytes | None] = []
            with trio.fail_after(30):
                while len(got) < 5:
                    got.extend(r.value for r in await pc.next_batch())
        assert got == [b"%d" % i for i in range(5)]
        assert "due to log retention time" not in kafka.log_text(1)


async def test_open_kafka_cluster_runs_in_a_trio_test() -> None:
    async with open_kafka_cluster(1) as kafka:
        await kafka.create_topic("events", 2)
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            first = await producer.send("events", b"a", partition=1)
        await kafka.broker_down(1)
        assert not kafka.running(1)
        await kafka.broker_up(1)
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            second = await producer.send("events", b"b", partition=1)
        assert (first.offset, second.offset) == (0, 1)
        directory = kafka.directory
    assert not directory.exists()  # an owned directory goes with the cluster
    await trio.sleep(0)


def test_the_kafka_command_refuses_a_bad_feature(capsys: pytest.CaptureFixture[str]) -> None:
    from pykaf.testing.__main__ import kafka_main, kafka_parser

    args = kafka_parser().parse_args(["--feature", "transaction.version=1", "--feature", "a=2"])
    assert args.feature == ["transaction.version=1", "a=2"]
    assert kafka_main(["--feature", "transaction.version"]) == 2
    assert "not NAME=LEVEL" in capsys.readouterr().err
