"""The cluster client on librdkafka's mock cluster: leader moves, dead brokers, injected errors."""

from __future__ import annotations

import pytest
import trio

from pykaf import errors
from pykaf._cluster.client import NEWEST, open_client
from pykaf.testing import MockCluster

LIST_OFFSETS, FIND_COORDINATOR = 2, 10


async def test_leaders_spread_and_moves_are_followed(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 6, 3)
    async with open_client(mock_cluster.bootstrap, request_timeout=5) as client:
        assert [b.node_id for b in await client.brokers()] == [1, 2, 3]
        assert await client.partitions("t") == list(range(6))
        for target in (1, 2, 3):
            mock_cluster.set_partition_leader("t", 0, target)
            await client.refresh_metadata()
            assert (await client.leader("t", 0)).node_id == target
            assert await client.get_offset("t", 0, NEWEST) == 0


async def test_retriable_errors_are_retried(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 2, 1)
    async with open_client(mock_cluster.bootstrap, request_timeout=5, retry_backoff=0.01) as c:
        mock_cluster.start_request_tracking()
        mock_cluster.push_request_errors(LIST_OFFSETS, 6, 6)  # NOT_LEADER_OR_FOLLOWER twice
        assert await c.get_offset("t", 1, NEWEST) == 0
        assert mock_cluster.count_requests(LIST_OFFSETS) == 3
        mock_cluster.push_request_errors(FIND_COORDINATOR, 15)  # COORDINATOR_NOT_AVAILABLE
        assert (await c.coordinator("g")).node_id in (1, 2, 3)


async def test_non_retriable_errors_surface_with_their_class(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 1, 1)
    async with open_client(mock_cluster.bootstrap, request_timeout=5) as client:
        mock_cluster.push_request_errors(LIST_OFFSETS, 29)  # TOPIC_AUTHORIZATION_FAILED
        with pytest.raises(errors.TopicAuthorizationError):
            await client.get_offset("t", 0, NEWEST)
        mock_cluster.push_request_errors(FIND_COORDINATOR, 30)
        with pytest.raises(errors.GroupAuthorizationError):
            await client.coordinator("g")


async def test_broker_down_then_up(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 1, 1)
    mock_cluster.set_partition_leader("t", 0, 2)
    async with open_client(
        mock_cluster.bootstrap, request_timeout=2, reconnect_backoff=0.01
    ) as client:
        assert await client.get_offset("t", 0, NEWEST) == 0
        mock_cluster.broker_down(2)
        with pytest.raises(errors.KafkaConnectionError):
            await client.get_offset("t", 0, NEWEST)
        # Metadata still comes from the other brokers.
        await client.refresh_metadata()
        mock_cluster.broker_up(2)
        with trio.fail_after(10):
            while True:
                try:
                    assert await client.get_offset("t", 0, NEWEST) == 0
                    break
                except errors.KafkaConnectionError:
                    await trio.sleep(0.05)
        assert client.statistics().connects >= 2


async def test_controller_appears_when_the_cluster_names_one(mock_cluster: MockCluster) -> None:
    async with open_client(mock_cluster.bootstrap) as client:
        with pytest.raises(errors.BrokerNotAvailableError, match="no controller"):
            await client.controller()
        mock_cluster.set_controller(3)
        await client.refresh_metadata()
        assert (await client.controller()).node_id == 3


async def test_coordinator_moves_are_followed(mock_cluster: MockCluster) -> None:
    async with open_client(mock_cluster.bootstrap) as client:
        mock_cluster.set_coordinator("group", "g1", 2)
        assert (await client.coordinator("g1")).node_id == 2
        mock_cluster.set_coordinator("group", "g1", 3)
        assert (await client.coordinator("g1")).node_id == 2  # cached
        assert (await client.refresh_coordinator("g1")).node_id == 3
        mock_cluster.set_coordinator("transaction", "tx", 1)
        assert (await client.transaction_coordinator("tx")).node_id == 1
