"""pykaf beside Kafka's own Java clients (kafka-tools 4.3.1, from the cluster's jars).

Kafka's test tools print one JSON event a line; the tests parse them and
check records exactly (keys, values, partitions, offsets, order, counts):

- ``VerifiableProducer`` (idempotent, acks=all) writes what pykaf reads, and
  pykaf's murmur2 partitioner puts every key where Java's did;
- pykaf writes what ``VerifiableConsumer`` reads and commits;
- ``VerifiableConsumer`` (classic protocol, range) and a pykaf member share
  one group: disjoint assignments covering the topic, every record read
  once, and pykaf's commits are where Java resumes when pykaf leaves;
- a pykaf consumer-protocol member joins a group of ``VerifiableConsumer``
  classic members: the group converts to a consumer group and back (KIP-848's
  online migration), every record read once;
- ``TransactionalMessageCopier`` (Java's transactional producer, random
  aborts) writes what pykaf's read_committed consumer reads exactly once;
- ``ConsoleConsumer`` with ``--isolation-level read_committed`` reads exactly
  what pykaf's read_committed consumer reads of interleaved committed and
  aborted transactions of two pykaf transactional producers.
"""

from __future__ import annotations

from collections import Counter
from contextlib import AsyncExitStack

import pytest
import trio
from peer_support import (
    JavaTools,
    JsonProcess,
    Recorder,
    Row,
    open_json_process,
    read_all,
    run_json,
    unique,
    write_interleaved_transactions,
)

import pykaf
from pykaf.testing import KafkaCluster

pytestmark = pytest.mark.broker

TOOLS = "org.apache.kafka.tools."
#: Java's assignor classes by the protocol names pykaf offers.
JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


async def test_verifiable_producer_to_pykaf(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    topic = unique("java-vp")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 3)
    config = java_tools.properties(
        enable_idempotence="true",
        retries="2147483647",
        max_in_flight_requests_per_connection="5",
        linger_ms="5",
    )
    events = await run_json(
        "VerifiableProducer",
        java_tools.command(
            TOOLS + "VerifiableProducer",
            *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
            *("--max-messages", "300", "--acks", "-1", "--repeating-keys", "7"),
            *("--value-prefix", "42", "--command-config", config),
        ),
    )
    sent = [e for e in events if e["name"] == "producer_send_success"]
    failed = [e for e in events if e["name"] == "producer_send_error"]
    assert not failed, failed[:3]
    assert len(sent) == 300
    assert sorted(e["value"] for e in sent) == sorted(f"42.{i}" for i in range(300))
    assert all(e["key"] == str(int(e["value"].split(".")[1]) % 7) for e in sent)
    expected = sorted(
        (e["partition"], e["offset"], _text(e["key"]), _text(e["value"])) for e in sent
    )

    rows = await read_all(kafka_cluster.bootstrap, topic, 3)
    assert rows == expected
    for p in range(3):  # each partition holds its values in the order they were sent
        values = [int(v.split(b".")[1]) for part, _, _, v in rows if part == p and v]
        assert values == sorted(values)
        assert [o for part, o, _, _ in rows if part == p] == list(range(len(values)))

    # pykaf's default partitioner (murmur2) puts every key where Java's put it.
    java_partition = {e["key"]: e["partition"] for e in sent}
    assert len(set(java_partition.values())) > 1  # 7 keys over 3 partitions: a real check
    async with pykaf.open_producer(kafka_cluster.bootstrap) as producer:
        for key, partition in sorted(java_partition.items()):
            md = await producer.send(topic, b"pykaf", key=key.encode())
            assert md.partition == partition, key


async def test_pykaf_to_verifiable_consumer(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    topic, group = unique("java-vc"), unique("java-vc-group")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 3)
    written: list[Row] = []
    async with pykaf.open_producer(kafka_cluster.bootstrap, linger=0.01) as producer:
        for i in range(240):
            md = await producer.send(topic, b"value-%d" % i, key=b"key-%d" % (i % 11))
            written.append((md.partition, md.offset, b"key-%d" % (i % 11), b"value-%d" % i))
    assert len({row[0] for row in written}) == 3

    events = await run_json(
        "VerifiableConsumer",
        java_tools.command(
            TOOLS + "VerifiableConsumer",
            *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
            *("--group-id", group, "--group-protocol", "classic", "--max-messages", "240"),
            *("--verbose", "--reset-policy", "earliest"),
        ),
    )
    records = [e for e in events if e["name"] == "record_data"]
    got = sorted((e["partition"], e["offset"], _text(e["key"]), _text(e["value"])) for e in records)
    assert got == sorted(written)
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits), commits
    ends = Counter(row[0] for row in written)
    async with pykaf.open_admin(kafka_cluster.bootstrap) as admin:
        committed = await admin.list_group_offsets(group)
    assert {tp: om.offset for tp, om in committed.items()} == {
        (topic, p): n for p, n in ends.items()
    }


def java_assignment(member: JsonProcess) -> set[int] | None:
    """The Java member's current assignment (None while it owns nothing).

    Events are incremental under cooperative-sticky (only what moved) and
    whole under eager assignors (all revoked, then all assigned): both add up.
    """
    current: set[int] = set()
    for e in member.events:
        moved = {p["partition"] for p in e.get("partitions") or []}
        if e["name"] == "partitions_assigned":
            current |= moved
        elif e["name"] in ("partitions_revoked", "partitions_lost"):
            current -= moved
    return current or None


async def write_keyed(bootstrap: str, topic: str, numbers: range) -> list[Row]:
    """Write ``v<i>`` with key ``k<i % 17>`` for each number; the rows as written."""
    written: list[Row] = []
    async with pykaf.open_producer(bootstrap) as producer:
        for i in numbers:
            key, value = b"k%d" % (i % 17), b"v%d" % i
            md = await producer.send(topic, value, key=key)
            written.append((md.partition, md.offset, key, value))
    return written


def java_rows(member: JsonProcess, start: int = 0) -> list[Row]:
    return [
        (e["partition"], e["offset"], _text(e["key"]), _text(e["value"]))
        for e in member.events[start:]
        if e["name"] == "record_data"
    ]


# The first member leads the group: its assignor computes the assignment.
# (range with pykaf leading is left out for time: pykaf's range is Java's,
# checked by tests/group/test_assignors.py.)
@pytest.mark.parametrize(
    ("assignor", "first"),
    [("range", "java"), ("cooperative-sticky", "java"), ("cooperative-sticky", "pykaf")],
)
async def test_group_shared_with_verifiable_consumer(
    kafka_cluster: KafkaCluster, java_tools: JavaTools, assignor: str, first: str
) -> None:
    topic, group = unique("java-group"), unique("java-group")
    partitions = 4
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, partitions)
    config = java_tools.properties(heartbeat_interval_ms="500")
    java_cmd = java_tools.command(
        TOOLS + "VerifiableConsumer",
        *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
        *("--group-id", group, "--group-protocol", "classic", "--verbose"),
        *("--session-timeout", "10000", "--reset-policy", "earliest"),
        *("--assignment-strategy", JAVA_ASSIGNORS[assignor]),
        *("--command-config", config),
    )
    everything = set(range(partitions))
    recorder = Recorder()
    async with AsyncExitStack() as stack:

        async def start_pykaf() -> pykaf.ConsumerGroup:
            member = await stack.enter_async_context(
                pykaf.open_consumer_group(
                    kafka_cluster.bootstrap,
                    group,
                    [topic],
                    assignors=[assignor],
                    session_timeout=10,
                    heartbeat_interval=0.5,
                    auto_commit_interval=0.5,
                )
            )
            nursery = await stack.enter_async_context(trio.open_nursery())
            nursery.start_soon(member.consume, recorder)
            return member

        if first == "pykaf":
            member = await start_pykaf()
            await recorder.wait_for(
                lambda: recorder.assignments and recorder.assignments[-1] == everything,
                "assignment of all",
            )
            java = await stack.enter_async_context(
                open_json_process("VerifiableConsumer", java_cmd)
            )
        else:
            java = await stack.enter_async_context(
                open_json_process("VerifiableConsumer", java_cmd)
            )
            await java.wait_for(lambda: java_assignment(java) == everything, "assignment of all")
            member = await start_pykaf()

        def shared() -> bool:
            mine = recorder.assignments[-1] if recorder.assignments else set()
            theirs = java_assignment(java)
            return bool(mine) and bool(theirs) and mine | (theirs or set()) == everything

        await java.wait_for(shared, "shared assignment")
        mine, theirs = recorder.assignments[-1], java_assignment(java)
        assert theirs is not None
        assert not mine & theirs and len(mine) == len(theirs) == 2, (mine, theirs)

        written = await write_keyed(kafka_cluster.bootstrap, topic, range(0, 200))
        assert {row[0] for row in written} == everything
        await java.wait_for(
            lambda: len(java_rows(java)) + len(recorder.rows) >= len(written),
            "all records read",
        )
        assert sorted(java_rows(java) + recorder.rows) == sorted(written)
        assert {row[0] for row in recorder.rows} <= mine
        assert {row[0] for row in java_rows(java)} <= theirs
        java_seen = len(java.events)
        await member.aclose()  # commits, leaves: Java takes every partition

        await java.wait_for(lambda: java_assignment(java) == everything, "reassignment of all")
        more = await write_keyed(kafka_cluster.bootstrap, topic, range(200, 240))
        await java.wait_for(
            lambda: len(java_rows(java, java_seen)) >= len(more), "the records after the leave"
        )
        # Java resumed every partition pykaf had at pykaf's commits: nothing again.
        assert sorted(java_rows(java, java_seen)) == sorted(more)


async def test_console_consumer_read_committed_matches_pykaf(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    topic = unique("java-txn")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 2)
    committed, aborted = await write_interleaved_transactions(
        kafka_cluster.bootstrap, topic, compression="gzip"
    )
    assert len(committed) == 60 and len(aborted) == 60

    pykaf_rows = await read_all(kafka_cluster.bootstrap, topic, 2)
    assert sorted((k, v) for _, _, k, v in pykaf_rows) == sorted(committed)
    uncommitted = await read_all(
        kafka_cluster.bootstrap, topic, 2, isolation_level="read_uncommitted"
    )
    assert len(uncommitted) == 120  # the aborted records are there, for those who look

    console = java_tools.command(
        TOOLS + "consumer.ConsoleConsumer",
        *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
        *("--from-beginning", "--isolation-level", "read_committed"),
        *("--max-messages", str(len(committed)), "--timeout-ms", "30000"),
        *("--formatter-property", "print.partition=true"),
        *("--formatter-property", "print.offset=true"),
        *("--formatter-property", "print.key=true"),
        *("--formatter-property", "key.separator=\t"),  # between every column
    )
    async with open_json_process("ConsoleConsumer", console) as java:
        await java.wait_exit(90)
    java_rows_: list[Row] = []
    for line in java.other_lines:
        if not line.startswith("Partition:"):
            continue  # "Processed a total of N messages"
        part, offset, k, v = line.split("\t")
        java_rows_.append(
            (int(part.split(":")[1]), int(offset.split(":")[1]), k.encode(), v.encode())
        )
    assert sorted(java_rows_) == pykaf_rows


async def test_java_transactional_copier_to_pykaf(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    """Java's transactional producer (with random aborts) as pykaf's read_committed sees it."""
    source, target, group = unique("java-copy-in"), unique("java-copy-out"), unique("copier")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, source, 1)
    await trio.to_thread.run_sync(kafka_cluster.create_topic, target, 1)
    written = [(b"key-%d" % (i % 5), b"value-%d" % i) for i in range(300)]
    async with pykaf.open_producer(kafka_cluster.bootstrap) as producer:
        for key, value in written:
            producer.send_nowait(source, value, key=key)
        await producer.flush()

    events = await run_json(
        "TransactionalMessageCopier",
        java_tools.command(
            TOOLS + "TransactionalMessageCopier",
            *("--broker-list", kafka_cluster.bootstrap, "--transactional-id", unique("copier")),
            *("--input-topic", source, "--input-partition", "0", "--output-topic", target),
            *("--consumer-group", group, "--transaction-size", "20", "--max-messages", "300"),
            *("--enable-random-aborts", "--use-group-metadata"),
        ),
        timeout=120,
    )
    assert events and events[-1].get("remaining") == 0, events[-3:]

    # read_committed: every input record once, in order; aborted copies never.
    rows = await read_all(kafka_cluster.bootstrap, target, 1)
    assert [(k, v) for _, _, k, v in rows] == written
    everything = await read_all(
        kafka_cluster.bootstrap, target, 1, isolation_level="read_uncommitted"
    )
    assert set(rows) <= set(everything)
    committed_offsets = {o for _, o, _, _ in rows}
    aborted = [(k, v) for _, o, k, v in everything if o not in committed_offsets]
    assert set(aborted) <= set(written)  # aborted attempts at copies, redone later
    async with pykaf.open_admin(kafka_cluster.bootstrap) as admin:
        offsets = await admin.list_group_offsets(group)
    assert {tp: om.offset for tp, om in offsets.items()} == {(source, 0): 300}


async def test_console_consumer_reads_pykaf_batches(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    """Java decodes pykaf's batches of every codec: keys, values, headers, timestamps."""
    topic = unique("java-codecs")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 1)
    expected: list[str] = []
    base = 1_700_000_000_000
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        async with pykaf.open_producer(
            kafka_cluster.bootstrap, compression=codec, linger=0.05
        ) as producer:
            sent = []
            for i in range(40):
                key = None if i % 8 == 0 else b"%s-k%d" % (codec.encode(), i % 5)
                value = b"%s-%d-" % (codec.encode(), i) + b"x" * (i * 37 % 300)
                headers: list[tuple[str, bytes | None]] = [("codec", codec.encode())]
                if i % 3 == 0:
                    headers += [("empty", b""), ("nothing", None)]
                timestamp = base + i * 1000
                producer.send_nowait(topic, value, key=key, headers=headers, timestamp=timestamp)
                sent.append((timestamp, key, value, headers))
            await producer.flush()
        for timestamp, key, value, headers in sent:
            shown = ",".join(f"{k}:{'null' if v is None else v.decode()}" for k, v in headers)
            text_key = "null" if key is None else key.decode()
            expected.append(f"CreateTime:{timestamp}\t{shown}\t{text_key}\t{value.decode()}")

    console = java_tools.command(
        TOOLS + "consumer.ConsoleConsumer",
        *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
        *("--from-beginning", "--max-messages", str(len(expected)), "--timeout-ms", "30000"),
        *("--formatter-property", "print.timestamp=true"),
        *("--formatter-property", "print.headers=true"),
        *("--formatter-property", "print.key=true"),
        *("--formatter-property", "key.separator=\t"),
    )
    async with open_json_process("ConsoleConsumer", console) as java:
        await java.wait_exit(90)
    lines = [line for line in java.other_lines if line.startswith("CreateTime:")]
    assert lines == expected  # one partition: in pykaf's order


async def test_classic_pykaf_member_in_a_consumer_protocol_group(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    """pykaf (classic protocol) joins a group Java runs with KIP-848's protocol.

    Kafka 4 lets classic members join a ``consumer`` group (KIP-848's online
    migration): the coordinator assigns their partitions with its own assignor
    and hands them out through JoinGroup/SyncGroup.
    """
    topic, group = unique("java-848"), unique("java-848")
    partitions = 4
    everything = set(range(partitions))
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, partitions)
    java_cmd = java_tools.command(
        TOOLS + "VerifiableConsumer",
        *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
        *("--group-id", group, "--group-protocol", "consumer", "--verbose"),
        *("--reset-policy", "earliest"),
    )
    # Consumer-protocol members heartbeat at the interval the group says (5 s
    # by default), and rebalances move at that pace: make it short. (A group
    # config, KIP-848; pykaf's admin alters topic and broker configs only, so
    # the request is made here: IncrementalAlterConfigs, resource type GROUP.)
    R = pykaf.protocol.IncrementalAlterConfigsRequest
    request = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=32,
                resource_name=group,
                configs=[
                    R.AlterableConfig(
                        name="consumer.heartbeat.interval.ms", config_operation=0, value="500"
                    )
                ],
            )
        ],
        validate_only=False,
    )
    async with pykaf.open_client(kafka_cluster.bootstrap) as client:
        conn = await client.any_connection()
        response = await conn.request(request)
    assert [r.error_code for r in response.responses] == [0], response
    recorder = Recorder()
    async with open_json_process("VerifiableConsumer", java_cmd) as java:
        await java.wait_for(lambda: java_assignment(java) == everything, "assignment of all")
        async with (
            pykaf.open_consumer_group(
                kafka_cluster.bootstrap,
                group,
                [topic],
                session_timeout=10,
                heartbeat_interval=0.5,
                auto_commit_interval=0.5,
            ) as member,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(member.consume, recorder)

            def shared() -> bool:
                mine = recorder.assignments[-1] if recorder.assignments else set()
                theirs = java_assignment(java)
                return bool(mine) and bool(theirs) and mine | (theirs or set()) == everything

            await java.wait_for(shared, "shared assignment", timeout=60)
            mine, theirs = recorder.assignments[-1], java_assignment(java)
            assert theirs is not None
            assert not mine & theirs and len(mine) == len(theirs) == 2, (mine, theirs)
            written = await write_keyed(kafka_cluster.bootstrap, topic, range(0, 100))
            await java.wait_for(
                lambda: len(java_rows(java)) + len(recorder.rows) >= len(written),
                "all records read",
            )
            assert sorted(java_rows(java) + recorder.rows) == sorted(written)
            await member.aclose()
        await java.wait_for(lambda: java_assignment(java) == everything, "reassignment of all")


async def test_a_pykaf_consumer_protocol_member_upgrades_a_java_classic_group(
    kafka_cluster: KafkaCluster, java_tools: JavaTools
) -> None:
    """Online migration with Java: ``VerifiableConsumer --group-protocol classic`` runs
    the group; a pykaf consumer-protocol member joins and the group becomes a consumer
    group (Java's member, told to rejoin, gets its share through JoinGroup/SyncGroup);
    pykaf leaves and the group is a classic one again, Java resuming at pykaf's commits.
    """
    topic, group = unique("java-migrate"), unique("java-migrate")
    partitions = 4
    everything = set(range(partitions))
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, partitions)
    config = java_tools.properties(heartbeat_interval_ms="500")
    java_cmd = java_tools.command(
        TOOLS + "VerifiableConsumer",
        *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
        *("--group-id", group, "--group-protocol", "classic", "--verbose"),
        *("--session-timeout", "10000", "--reset-policy", "earliest"),
        *("--assignment-strategy", JAVA_ASSIGNORS["cooperative-sticky"]),
        *("--command-config", config),
    )
    recorder = Recorder()

    async def protocol() -> str:
        async with pykaf.open_admin(kafka_cluster.bootstrap) as admin:
            return (await admin.describe_group(group)).group_protocol

    async with open_json_process("VerifiableConsumer", java_cmd) as java:
        await java.wait_for(lambda: java_assignment(java) == everything, "assignment of all")
        written = await write_keyed(kafka_cluster.bootstrap, topic, range(0, 100))
        await java.wait_for(lambda: len(java_rows(java)) >= len(written), "the first records")
        assert await protocol() == "classic"
        async with (
            pykaf.open_consumer_group(
                kafka_cluster.bootstrap,
                group,
                [topic],
                group_protocol="consumer",
                auto_commit_interval=0.5,
            ) as member,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(member.consume, recorder)

            def shared() -> bool:
                mine = recorder.assignments[-1] if recorder.assignments else set()
                theirs = java_assignment(java)
                return bool(mine) and bool(theirs) and mine | (theirs or set()) == everything

            await java.wait_for(shared, "shared assignment", timeout=60)
            assert await protocol() == "consumer"
            mine, theirs = recorder.assignments[-1], java_assignment(java)
            assert theirs is not None and not mine & theirs, (mine, theirs)
            java_seen = len(java.events)
            more = await write_keyed(kafka_cluster.bootstrap, topic, range(100, 200))
            await java.wait_for(
                lambda: len(java_rows(java, java_seen)) + len(recorder.rows) >= len(more),
                "the records after the upgrade",
            )
            # pykaf started at Java's commits: nothing read twice
            assert sorted(java_rows(java, java_seen) + recorder.rows) == sorted(more)
            await member.aclose()  # the last consumer-protocol member: classic again
        await java.wait_for(lambda: java_assignment(java) == everything, "reassignment of all")
        assert await protocol() == "classic"
        java_seen = len(java.events)
        last = await write_keyed(kafka_cluster.bootstrap, topic, range(200, 240))
        await java.wait_for(
            lambda: len(java_rows(java, java_seen)) >= len(last), "the records after the leave"
        )
        assert sorted(java_rows(java, java_seen)) == sorted(last)


@pytest.mark.parametrize("first", ["java", "pykaf"])
async def test_consumer_protocol_group_shared_with_verifiable_consumer(
    kafka_cluster: KafkaCluster, java_tools: JavaTools, first: str
) -> None:
    """A pykaf KIP-848 member and ``VerifiableConsumer --group-protocol consumer`` in one group.

    The broker splits the partitions between them; every record is read once;
    when pykaf leaves, Java resumes its partitions at pykaf's commits.
    """
    topic, group = unique("java-848-mixed"), unique("java-848-mixed")
    partitions = 4
    everything = set(range(partitions))
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, partitions)
    java_cmd = java_tools.command(
        TOOLS + "VerifiableConsumer",
        *("--bootstrap-server", kafka_cluster.bootstrap, "--topic", topic),
        *("--group-id", group, "--group-protocol", "consumer", "--verbose"),
        *("--reset-policy", "earliest"),
    )
    recorder = Recorder()
    async with AsyncExitStack() as stack:

        async def start_pykaf() -> pykaf.ConsumerGroup:
            member = await stack.enter_async_context(
                pykaf.open_consumer_group(
                    kafka_cluster.bootstrap,
                    group,
                    [topic],
                    group_protocol="consumer",
                    auto_commit_interval=0.5,
                )
            )
            nursery = await stack.enter_async_context(trio.open_nursery())
            nursery.start_soon(member.consume, recorder)
            return member

        def mine() -> set[int]:
            return recorder.assignments[-1] if recorder.assignments else set()

        if first == "pykaf":
            member = await start_pykaf()
            await recorder.wait_for(lambda: mine() == everything, "assignment of all")
            java = await stack.enter_async_context(
                open_json_process("VerifiableConsumer", java_cmd)
            )
        else:
            java = await stack.enter_async_context(
                open_json_process("VerifiableConsumer", java_cmd)
            )
            await java.wait_for(lambda: java_assignment(java) == everything, "assignment of all")
            member = await start_pykaf()

        def shared() -> bool:
            theirs = java_assignment(java)
            return bool(mine()) and bool(theirs) and mine() | (theirs or set()) == everything

        await java.wait_for(shared, "shared assignment", timeout=60)
        theirs = java_assignment(java)
        assert theirs is not None
        assert not mine() & theirs and len(mine()) == len(theirs) == 2, (mine(), theirs)
        written = await write_keyed(kafka_cluster.bootstrap, topic, range(0, 200))
        await java.wait_for(
            lambda: len(java_rows(java)) + len(recorder.rows) >= len(written),
            "all records read",
        )
        assert sorted(java_rows(java) + recorder.rows) == sorted(written)
        java_seen = len(java.events)
        await member.aclose()  # commits, leaves (epoch -1): Java takes every partition
        await java.wait_for(lambda: java_assignment(java) == everything, "reassignment of all")
        more = await write_keyed(kafka_cluster.bootstrap, topic, range(200, 240))
        await java.wait_for(
            lambda: len(java_rows(java, java_seen)) >= len(more), "the records after the leave"
        )
        assert sorted(java_rows(java, java_seen)) == sorted(more)
