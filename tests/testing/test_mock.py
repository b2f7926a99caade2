"""MockCluster against the real librdkafka mock, with confluent-kafka as the client."""

from __future__ import annotations

import gc
import os
import socket
import time

import pytest

pytest.importorskip("confluent_kafka")

import broker_clients as bc

from pykaf.errors import TopicAuthorizationError
from pykaf.testing import (
    ALL_BROKERS,
    MockCluster,
    MockClusterError,
    MockRequest,
    find_librdkafka,
)

PRODUCE, FETCH, METADATA, API_VERSIONS, JOIN_GROUP, FIND_COORDINATOR = 0, 1, 3, 18, 11, 10

pytestmark = pytest.mark.broker


def conf(cluster: MockCluster) -> dict[str, object]:
    return {"bootstrap.servers": cluster.bootstrap}


def refused(host: str, port: int) -> bool:
    """Whether a connection to host:port is refused, or closed before any byte."""
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.settimeout(0.2)
            return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


# -- life cycle ------------------------------------------------------------
def test_library_is_the_one_confluent_kafka_uses() -> None:
    path = find_librdkafka()
    assert os.path.exists(path)
    with MockCluster(1) as cluster:
        assert cluster.librdkafka_version == bc.ck.libversion()[0]
        assert cluster.library_path == path
        assert cluster.supports("rd_kafka_mock_cluster_new")
        assert not cluster.supports("rd_kafka_no_such_function")


def test_brokers_and_bootstrap(mock_cluster: MockCluster) -> None:
    assert mock_cluster.running
    assert mock_cluster.broker_ids == [1, 2, 3]
    listeners = mock_cluster.listeners
    assert mock_cluster.bootstrap == ",".join(f"{h}:{p}" for h, p in listeners.values())
    md = bc.metadata(conf(mock_cluster))
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == listeners


def test_close_is_idempotent_and_frees_the_ports() -> None:
    cluster = MockCluster(2).start()
    host, port = cluster.listeners[1]
    assert not refused(host, port)
    cluster.close()
    cluster.close()
    assert not cluster.running
    assert refused(host, port)
    with pytest.raises(MockClusterError, match="not running"):
        cluster.bootstrap  # noqa: B018
    with pytest.raises(MockClusterError, match="not running"):
        cluster.create_topic("x")


def test_garbage_collected_cluster_is_destroyed() -> None:
    cluster = MockCluster(1).start()
    host, port = cluster.listeners[1]
    del cluster
    gc.collect()
    assert refused(host, port)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        MockCluster(0)
    with pytest.raises(MockClusterError, match="rejected"):
        MockCluster(1, config={"no.such.property": "1"}).start()
    with MockCluster(1) as cluster, pytest.raises(MockClusterError, match="already running"):
        cluster.start()


# -- topics, produce and consume --------------------------------------------
def test_produce_and_consume_across_three_brokers(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("orders", partitions=6, replication_factor=3)
    leaders = bc.leaders(conf(mock_cluster), "orders")
    assert sorted(leaders) == list(range(6))
    assert set(leaders.values()) <= {1, 2, 3} and len(set(leaders.values())) > 1
    values = [b"m%d" % i for i in range(60)]
    for partition in range(6):
        delivered = bc.produce(
            conf(mock_cluster), "orders", values[partition::6], partition=partition
        )
        assert [m.offset() for m in delivered] == list(range(10))
    mock_cluster.set_group_initial_rebalance_delay(0)
    got = bc.consume_group(conf(mock_cluster), "orders", "g-orders", 60)
    assert sorted(got) == sorted(values)


def test_create_existing_topic_fails_with_its_code(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("dup", 2)
    with pytest.raises(MockClusterError, match="TOPIC_ALREADY_EXISTS") as info:
        mock_cluster.create_topic("dup", 2)
    assert info.value.code == 36


def test_auto_created_topics_have_four_partitions(mock_cluster: MockCluster) -> None:
    bc.produce(conf(mock_cluster), "auto", [b"x"])
    assert len(bc.leaders(conf(mock_cluster), "auto")) == 4


def test_delete_topic(mock_cluster: MockCluster) -> None:
    if not mock_cluster.supports("rd_kafka_mock_topic_delete"):
        pytest.skip("this librdkafka cannot delete mock topics")
    mock_cluster.create_topic("gone", 1)
    assert "gone" in bc.metadata(conf(mock_cluster)).topics
    mock_cluster.delete_topic("gone")
    assert "gone" not in bc.metadata(conf(mock_cluster)).topics


def test_topic_error_shows_in_metadata(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("secret", 1)
    mock_cluster.set_topic_error("secret", TopicAuthorizationError)
    md = bc.metadata(conf(mock_cluster), "secret")
    assert md.topics["secret"].error.code() == 29
    mock_cluster.set_topic_error("secret", 0)
    assert bc.metadata(conf(mock_cluster), "secret").topics["secret"].error is None


# -- leaders and brokers -----------------------------------------------------
def test_leader_move_shows_in_metadata_and_produce_follows(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("moving", 3)
    before = bc.leaders(conf(mock_cluster), "moving")
    new_leader = before[0] % 3 + 1
    mock_cluster.set_partition_leader("moving", 0, new_leader)
    after = bc.leaders(conf(mock_cluster), "moving")
    assert after == {**before, 0: new_leader}
    delivered = bc.produce(conf(mock_cluster), "moving", [b"a", b"b"], partition=0)
    assert [m.offset() for m in delivered] == [0, 1]
    mock_cluster.set_partition_leader("moving", 1, None)
    assert bc.leaders(conf(mock_cluster), "moving")[1] == -1


def test_broker_down_then_up(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("fragile", 1)
    mock_cluster.set_partition_leader("fragile", 0, 2)
    base = conf(mock_cluster)
    bc.produce(base, "fragile", [b"before"])
    host, port = mock_cluster.listeners[2]

    mock_cluster.broker_down(2)
    assert refused(host, port)  # or, in older librdkafka, accepted and closed at once
    # The leader is down and leadership does not move: delivery times out.
    delivered, errors = bc.produce_results(
        base, "fragile", [b"lost"], **{"message.timeout.ms": 1500}
    )
    assert not delivered
    assert [e.code() for e in errors] == [bc.ck.KafkaError._MSG_TIMED_OUT]

    mock_cluster.broker_up(2)
    delivered = bc.produce(base, "fragile", [b"after"])
    assert delivered[0].offset() == 1


def test_broker_down_all_brokers(mock_cluster: MockCluster) -> None:
    mock_cluster.broker_down(ALL_BROKERS)
    with pytest.raises(bc.ck.KafkaException):
        bc.admin_client(conf(mock_cluster)).list_topics(timeout=1)
    mock_cluster.broker_up(ALL_BROKERS)
    assert len(bc.metadata(conf(mock_cluster)).brokers) == 3


def test_unknown_broker_is_an_error(mock_cluster: MockCluster) -> None:
    with pytest.raises(MockClusterError, match=r"BROKER_NOT_AVAILABLE|UNKNOWN_BROKER"):
        mock_cluster.set_partition_leader("t", 0, 99)


def test_controller(mock_cluster: MockCluster) -> None:
    mock_cluster.set_controller(2)
    assert bc.metadata(conf(mock_cluster)).controller_id == 2
    mock_cluster.set_controller(3)
    assert bc.metadata(conf(mock_cluster)).controller_id == 3


def test_rack(mock_cluster: MockCluster) -> None:
    # confluent-kafka shows no racks (and the mock has no DescribeCluster):
    # check that the mock takes the setting and refuses unknown brokers.
    mock_cluster.set_rack(1, "rack-a")
    mock_cluster.set_rack(ALL_BROKERS, "rack-b")
    with pytest.raises(MockClusterError):
        mock_cluster.set_rack(99, "rack-c")


def test_initial_rebalance_delay(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("quick", 1)
    bc.produce(conf(mock_cluster), "quick", [b"x"])
    mock_cluster.set_group_initial_rebalance_delay(0)
    started = time.monotonic()
    bc.consume_group(conf(mock_cluster), "quick", "g-quick", 1)
    assert time.monotonic() - started < 2.5  # 3 s with the default delay


def test_decommission_and_add_broker(mock_cluster: MockCluster) -> None:
    if not mock_cluster.supports("rd_kafka_mock_broker_decommission"):
        pytest.skip("this librdkafka cannot add or remove mock brokers")
    mock_cluster.decommission_broker(3)
    assert sorted(bc.metadata(conf(mock_cluster)).brokers) == [1, 2]
    mock_cluster.add_broker(4)
    assert sorted(bc.metadata(conf(mock_cluster)).brokers) == [1, 2, 4]


def test_group_coordinator(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("coord", 1)
    bc.produce(conf(mock_cluster), "coord", [b"x"])
    mock_cluster.set_group_initial_rebalance_delay(0)
    mock_cluster.set_coordinator("group", "g-coord", 3)
    mock_cluster.start_request_tracking()
    bc.consume_group(conf(mock_cluster), "coord", "g-coord", 1)
    joins = {r.broker_id for r in mock_cluster.get_requests() if r.api_key == JOIN_GROUP}
    assert joins == {3}
    with pytest.raises(ValueError, match="key_type"):
        mock_cluster.set_coordinator("consumer", "g", 1)


# -- injected errors and latency ---------------------------------------------
def test_pushed_errors_fail_the_next_requests(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("guarded", 1)
    # Kafka's TOPIC_AUTHORIZATION_FAILED is not retriable: the first produce fails.
    mock_cluster.push_request_errors(PRODUCE, 29)
    _, errors = bc.produce_results(conf(mock_cluster), "guarded", [b"x"])
    assert [e.code() for e in errors] == [29]
    # The stack is used up: the next produce succeeds.
    assert bc.produce(conf(mock_cluster), "guarded", [b"y"])[0].offset() == 0


def test_pushed_retriable_errors_are_retried(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("flaky", 1)
    mock_cluster.start_request_tracking()
    # REQUEST_TIMED_OUT twice (as an int and as a pykaf error class), then success.
    from pykaf.errors import TimeoutError as KafkaTimeout

    mock_cluster.push_request_errors(PRODUCE, 7, KafkaTimeout)
    delivered = bc.produce(conf(mock_cluster), "flaky", [b"z"], **{"retry.backoff.ms": 10})
    assert delivered[0].offset() == 0
    assert mock_cluster.count_requests(PRODUCE) == 3


def test_clear_request_errors(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("cleared", 1)
    mock_cluster.push_request_errors(PRODUCE, 29, 29, 29)
    mock_cluster.clear_request_errors(PRODUCE)
    assert bc.produce(conf(mock_cluster), "cleared", [b"ok"])


def test_broker_error_rtts(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("slow", 1)
    mock_cluster.set_partition_leader("slow", 0, 1)
    mock_cluster.broker_push_request_error_rtts(1, PRODUCE, [(29, 0), (0, 400)])
    assert mock_cluster.broker_error_count(1, PRODUCE) == 2
    assert mock_cluster.broker_error_count(2, PRODUCE) == 0
    _, errors = bc.produce_results(conf(mock_cluster), "slow", [b"a"])
    assert [e.code() for e in errors] == [29]
    started = time.monotonic()
    bc.produce(conf(mock_cluster), "slow", [b"b"])
    assert time.monotonic() - started >= 0.4
    assert mock_cluster.broker_error_count(1, PRODUCE) == 0
    with pytest.raises(MockClusterError):
        mock_cluster.broker_push_request_error_rtts(42, PRODUCE, [(1, 0)])


def test_rtt_delays_every_response(mock_cluster: MockCluster) -> None:
    admin = bc.admin_client(conf(mock_cluster))
    admin.list_topics(timeout=5)  # connected
    mock_cluster.set_rtt(ALL_BROKERS, 300)
    started = time.monotonic()
    admin.list_topics(timeout=5)
    assert time.monotonic() - started >= 0.3
    mock_cluster.set_rtt(ALL_BROKERS, 0)
    started = time.monotonic()
    admin.list_topics(timeout=5)
    assert time.monotonic() - started < 0.3


def test_api_version_limits(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("old", 1)
    mock_cluster.start_request_tracking()
    mock_cluster.set_api_version(PRODUCE, 3, 3)
    bc.produce(conf(mock_cluster), "old", [b"v3"])
    assert mock_cluster.count_requests(PRODUCE) == 1


# -- request tracking --------------------------------------------------------
def test_request_tracking(mock_cluster: MockCluster) -> None:
    assert mock_cluster.get_requests() == []
    mock_cluster.start_request_tracking()
    t0 = time.monotonic()
    bc.metadata(conf(mock_cluster))
    requests = mock_cluster.get_requests()
    assert requests and all(isinstance(r, MockRequest) for r in requests)
    assert {API_VERSIONS, METADATA} <= {r.api_key for r in requests}
    assert all(r.broker_id in (1, 2, 3) for r in requests)
    stamps = [r.timestamp_us for r in requests]
    assert stamps == sorted(stamps)
    # librdkafka's clock is CLOCK_MONOTONIC, as is time.monotonic() on Linux.
    assert abs(stamps[0] / 1e6 - t0) < 5
    assert mock_cluster.count_requests(METADATA) >= 1
    assert mock_cluster.count_requests(broker_id=99) == 0

    mock_cluster.clear_requests()
    assert mock_cluster.get_requests() == []
    mock_cluster.stop_request_tracking()
    bc.metadata(conf(mock_cluster))
    assert mock_cluster.get_requests() == []
