"""Transactions V2 (KIP-890 part 2): used when the cluster's ``transaction.version`` is 2.

On Apache Kafka formatted with its default (4.3.1: ``transaction.version=2``)
the producer sends no AddPartitionsToTxn and no AddOffsetsToTxn (Produce v12
and TxnOffsetCommit v5 add the partition and the group) and takes the epoch
EndTxn v5 returns, one higher after every transaction. On Kafka formatted
with ``transaction.version=1`` it stays on V1; the fake cluster, made with
either ``transaction_version``, answers as Kafka does.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from txn_target import TxnTarget

import pykaf
from pykaf import protocol as P
from pykaf.testing import KafkaCluster

pytestmark = pytest.mark.broker

#: What Kafka 4.3.1 formats a cluster with when not told (checked below).
KAFKA_DEFAULT_TRANSACTION_VERSION = 2


def _expected_version(request: pytest.FixtureRequest, target: TxnTarget) -> int:
    """The transaction protocol the producer should use on ``target``."""
    if target.fake is not None:
        level = target.fake.transaction_version
    else:
        assert target.kafka is not None
        level = target.kafka.features.get("transaction.version", KAFKA_DEFAULT_TRANSACTION_VERSION)
    return 2 if level >= 2 else 1


async def test_transactions_use_the_clusters_transaction_version(
    request: pytest.FixtureRequest, target: TxnTarget
) -> None:
    expected = _expected_version(request, target)
    topic = await target.topic("tv", 2)
    source = await target.topic("tv-source", 1)
    group = target.unique("tv-group")
    calls: Counter[str] = Counter()

    def count(event: Any) -> None:
        calls[event.api] += 1

    committed: list[bytes] = []
    async with pykaf.open_producer(
        target.bootstrap, transactional_id=target.unique("tv"), on_request=count
    ) as producer:
        epochs = [producer.producer_epoch]
        for round_ in range(3):
            producer.begin_transaction()
            for p in (0, 1):
                value = b"c-%d-%d" % (round_, p)
                await producer.send(topic, value, partition=p)
                committed.append(value)
            await producer.send_offsets_to_transaction({(source, 0): 10 + round_}, group)
            await producer.commit_transaction()
            epochs.append(producer.producer_epoch)
        producer.begin_transaction()
        await producer.send(topic, b"aborted", partition=1)
        await producer.abort_transaction()
        epochs.append(producer.producer_epoch)
        producer.begin_transaction()  # an empty one: nothing to tell the coordinator
        await producer.commit_transaction()
        epochs.append(producer.producer_epoch)
        stats = producer.statistics()

    assert stats.transaction_version == expected
    assert calls["EndTxn"] >= 4
    if expected == 2:
        assert calls["AddPartitionsToTxn"] == 0
        assert calls["AddOffsetsToTxn"] == 0
        # EndTxn v5 gave a new epoch at each of the four ends, none for the empty one
        first = epochs[0]
        assert epochs == [first, first + 1, first + 2, first + 3, first + 4, first + 4]
    else:
        assert calls["AddPartitionsToTxn"] >= 4
        assert calls["AddOffsetsToTxn"] == 3
        assert epochs == [epochs[0]] * 6
    assert sorted(r.value for r in await target.read(topic, 2)) == sorted(committed)
    assert await target.committed(group, source, 0) == 12


async def test_kafka_reports_the_transaction_version_it_was_formatted_with(
    kafka_cluster: KafkaCluster, kafka_cluster_tv1: KafkaCluster
) -> None:
    """The feature as ApiVersions reports it, and the versions V2 needs (hand-added specs)."""
    expected = {
        kafka_cluster.bootstrap: kafka_cluster.features.get(
            "transaction.version", KAFKA_DEFAULT_TRANSACTION_VERSION
        ),
        kafka_cluster_tv1.bootstrap: 1,
    }
    for bootstrap, level in expected.items():
        async with pykaf.open_client(bootstrap) as client:
            versions = client.newest_features()
            assert versions is not None
            assert versions.feature_level("transaction.version") == level
            assert versions.finalized_features_epoch >= 0
            # Kafka 4.x speaks what pykaf's specs gained by hand (tests/data/kafka-specs/SOURCE.md)
            for request, version in (
                (P.ProduceRequest, 12),
                (P.TxnOffsetCommitRequest, 5),
                (P.EndTxnRequest, 5),
                (P.MetadataRequest, 13),
            ):
                assert versions.version_for(request.API_KEY) == version, request.__name__
