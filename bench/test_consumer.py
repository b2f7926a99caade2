"""Consumer benchmarks: 1,000,000 records read from a real broker, pykaf against its peers.

Cases (one pytest-benchmark group per broker, every client on the same topic
in the same run, back to back):

* ``consume-1M-tansu``: a Tansu broker (memory storage, one node); a
  4-partition topic, 250,000 records in each partition.
* ``consume-1M-mock``: librdkafka's mock cluster (3 brokers, leaders spread);
  a **32-partition** topic, 31,250 records in each. The mock keeps at most
  5 MiB of record batches per partition (``max_size = 5 * 1024 * 1024``, and
  at most 100,000 batches, in ``rd_kafka_mock_partition_init``): appending a
  batch drops the oldest whole batches until the partition is back under the
  limit. 1,000,000 records of 100 bytes (about 110 MB of batches) over 4
  partitions keeps only the last 47,660 records (20 batches of 2,383) of each,
  190,640 in all (measured). 31,250 records are 3.4 MB of batches, which it
  keeps whole; the setup checks that every partition still starts at offset 0.
  The mock also answers a Fetch with one batch per partition (2,383 records
  here), so it takes 14 Fetches to read a partition. This module runs a mock
  cluster of its own (fixture ``consumer_mock``) with
  ``group.initial.rebalance.delay.ms`` set to 0 (librdkafka's default is 3 s).
* ``consume-1M-fake``: pykaf's own fake cluster (``python -m pykaf.testing``,
  3 brokers, in a child process; fixture ``bench_fake``); a 4-partition
  topic. It answers a Fetch with stored batch bytes and no per-record work,
  so it shows the clients with a broker that is cheap per record.

Setup, once per broker and module (not timed): confluent-kafka's producer
writes 1,000,000 values of 100 random bytes (no keys, no headers, no
compression; ``produce()`` per record, the same number into each partition,
acks=all, idempotent, librdkafka's batching defaults), so that every client
reads the peer's batches, not batches shaped by pykaf's producer (which
writes 256 KiB batches by default); the setup checks that every
partition's high watermark (read from a Fetch: Tansu's ListOffsets(latest)
is wrong for multi-record batches, see ``bench/_brokers.py``) is its share
and its log start offset 0. The topic is read by every round and deleted at
the end of the module.

One call (a round) reads all 1,000,000 records from offset 0 and reads every
value's length (summed); each round then checks the record count and that sum
(100,000,000 bytes) outside the timing. A client that loses records fails. Not
timed (pytest-benchmark's ``setup``/``teardown``): creating the consumer and
fetching the topic's metadata before the round, closing it after. Timed:
assigning the partitions from the start (ListOffsets where the client resolves
"oldest"), connecting to their leaders, fetching and decoding everything. The
asyncio and trio clients keep their event loop running from setup to
teardown in a thread of their own; the benchmark's thread only waits for it.
The group variants (below) are timed from subscribe / ``consume`` on, so
their time also holds joining the group (JoinGroup, SyncGroup, OffsetFetch).

Fetch settings, the same for every client where it has the setting (the rest
at each client's defaults): at most 64 MiB per Fetch response and 8 MiB per
partition (Kafka's defaults are 50 MiB and 1 MiB: larger partition fetches
mean fewer round trips where the broker fills them), read_uncommitted (the
topic has no transactions; pykaf and librdkafka default to read_committed),
CRC-32C checked by everyone, the broker's wait for data left at 500 ms (no
round waits for it: every round stops at the high watermarks).

* ``pykaf`` (``pykaf.open_consumer``: ``fetch_max_bytes=64 MiB``,
  ``max_partition_fetch_bytes=8 MiB``, ``isolation_level="read_uncommitted"``,
  ``partition_buffer`` 4 and ``check_crcs`` as by default), one task per
  partition in a trio nursery, each with its own
  ``consume_partition(topic, p, OLDEST)``, two ways:

  - ``next_batch``: ``await pc.next_batch()`` until the partition's end
    offset, a loop over each list;
  - ``columnar``: ``await pc.next_batch(columnar=True)`` until the end
    offset: each piece decoded straight into a ``ColumnBatch`` (no ``Record``
    per record); the value bytes are summed from the values column's offsets,
    as a columnar reader would (the others call ``len()`` per record);
  - ``iter``: ``async for record in pc`` until the end offset;

  and ``sync``: the blocking ``pykaf.sync.Consumer`` (same settings) from the
  benchmark's thread, ``assign()`` at OLDEST, then ``consume(10000,
  timeout=1.0)`` until every record is in, as the confluent-kafka round reads.

* ``confluent-kafka``: ``Consumer`` with ``assign()`` at offset 0 (a group id
  is required but nothing is committed: ``enable.auto.commit=false``), then
  ``consume(num_messages=10000, timeout=1.0)`` until every record is in,
  checking each message's ``error()``. ``fetch.max.bytes=64 MiB``,
  ``max.partition.fetch.bytes=8 MiB``, ``isolation.level=read_uncommitted``,
  ``check.crcs=true`` (librdkafka's default is false) and
  **``fetch.queue.backoff.ms=10``**: with the default (1000 ms) librdkafka
  stops fetching a partition for a whole second each time its local queue
  passes ``queued.min.messages`` (100,000), which a few large fetches do at
  once; that held it at 0.14-0.17M records/s on both brokers here, against
  0.4-0.7M/s with 10 ms. ``queued.min.messages`` raised to 1,000,000 instead
  did no better.
* ``aiokafka``: ``AIOKafkaConsumer`` (no group, no commits;
  ``fetch_max_bytes`` and ``max_partition_fetch_bytes`` as above,
  ``check_crcs`` and read_uncommitted by default) with ``assign()`` and
  ``seek_to_beginning()``, then ``getmany(timeout_ms=1000,
  max_records=10000)`` until every record is in. It reads the whole 1,000,000
  too (about 3 s a round: the module takes about a minute).

Consumer groups, one member in a fresh group each round (a new group id: no
committed offsets, so ``auto_offset_reset="earliest"`` starts every partition
at 0), auto-commit on at each client's default (every 5 s, so in practice the
final commit at close), range assignment (both clients' first choice):

* ``pykaf[group]``: ``pykaf.open_consumer_group(bootstrap, group_id, [topic],
  **pykaf options above, auto_offset_reset="earliest")`` and
  ``group.consume(handler)``, sarama's handler contract: ``consume_claim``
  loops ``await claim.next_batch()`` up to the partition's end offset,
  sums the value lengths and calls ``session.mark_message(batch[-1])`` once per
  batch. Not timed: opening the group (client, metadata of the topic) and
  looking up and connecting to the coordinator (librdkafka does that as soon as
  its consumer exists, before subscribe). Once every claim is read the round
  cancels ``consume``, which commits the marks and leaves the group (not
  timed). Not ``group.aclose()``: called inside ``async with
  open_consumer_group(...)`` it cancels the rest of that block too, silently
  (``Consumer.aclose`` cancels the service nursery the context manager yields
  inside of; the next checkpoint raises Cancelled and the nursery swallows it).
* ``confluent-kafka[group]``: the settings above with a fresh ``group.id``,
  ``auto.offset.reset=earliest`` and ``enable.auto.commit`` at its default;
  ``subscribe()`` then ``consume()`` as above; ``close()`` outside the timing.

Each group round also checks that the member got one assignment (no
rebalance) and, after a synchronous commit outside the timing, that the
group's committed offsets are the partitions' ends. ``extra_info`` holds the
medians over the rounds of ``join_s`` (subscribe / consume to the
assignment: pykaf's ``handler.setup``, confluent-kafka's ``on_assign``),
``read_s`` (assignment to the last record) and
``records_per_s_after_join``.

**The brokers make a new group's first member wait.** Measured here:

* The librdkafka mock holds the JoinGroup of a group with no members for
  ``group.initial.rebalance.delay.ms``, 3 s by default, waiting for more
  members. This module's mock has it at 0 (one member has nobody to wait
  for), and joining takes 1-5 ms.
* Tansu 0.6.0 answers JoinGroup with MEMBER_ID_REQUIRED (KIP-394) at once,
  then holds the JoinGroup that carries the member id for ceil(session
  timeout / 2) whole seconds, at least 1 s: 23.0 s at the default 45 s
  session (pykaf's and librdkafka's default), 5.0 s at 10 s, 3.0 s at 6 s,
  1.0 s at 2, 1 and 0.3 s. It does so for a new group and for an existing
  group whose members all left (the same group id again: 3.0 s at 6 s), with
  JoinGroup v3 as with v5, and with static membership (``group_instance_id``)
  it holds SyncGroup for as long too. It has no setting for it (``tansu
  broker --help``). librdkafka waits the same (1.0 s at a 2 s session, 3.0 s
  at 6 s). So on Tansu both group clients run with ``session_timeout`` 2 s
  and ``heartbeat_interval`` 0.5 s (pykaf; ``session.timeout.ms=2000``,
  ``heartbeat.interval.ms=500`` for librdkafka), which makes it 1 s, the
  least Tansu waits, instead of 23 s a round. That second is in both
  clients' timed rounds (a group user on Tansu pays it) and dilutes the
  ``consume-1M-tansu | pykaf[group] | confluent-kafka[group]`` ratio towards
  1; ``join_s`` shows it (about 1.005 s for both) and ``read_s`` /
  ``records_per_s_after_join`` give the comparison without it. On the mock
  both clients keep their default session and heartbeat settings.

Pairing (``extra_info["params"]``, which ``bench/ratios.py`` matches):
``assign`` for the assign variants (pykaf's ``next_batch``, ``columnar``, ``iter`` and ``sync``,
confluent-kafka, aiokafka) and ``group`` for the two group variants, so
``pykaf[group]`` is compared with ``confluent-kafka[group]`` only and the
assign variants with each other.

``pykaf[raw-fetch]`` is informational, the broker's side of the picture: pykaf's
cluster client sends bare Fetch requests (the same sizes, one in flight per
broker, the brokers in parallel), walks the batch headers to find the next
offset and count records, and decodes no record. It is tagged
``params="decode=none"``, which no peer has, so ``bench/ratios.py`` pairs it
with nothing; compare its records/s with the others' in the pytest-benchmark
table or ``extra_info["records_per_s"]`` (and ``mb_per_s``). It is about the
ceiling of pykaf's consumer, whose fetcher asks the same way, with the broker
sharing the two cores.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import trio

from bench._support import AIOKAFKA, PYKAF, CpuMeter, bulk_values, note_rate, tag

if TYPE_CHECKING:
    from bench._brokers import BenchBroker

CONFLUENT = "confluent-kafka"
RECORDS = 1_000_000
VALUE_SIZE = 100
PARTITIONS = {"tansu": 4, "mock": 32, "fake": 4}  # the mock keeps 5 MiB a partition: see above
BROKERS = ("tansu", "mock", "fake")
ROUNDS = 5
ROUND_TIMEOUT_S = 120.0  # a stuck consumer fails its round instead of hanging the run

FETCH_MAX_BYTES = 64 << 20
PARTITION_FETCH_BYTES = 8 << 20
FETCH_MAX_WAIT_S = 0.5  # every client's default
CONSUME_BATCH = 10_000  # confluent-kafka num_messages, aiokafka max_records
CONFLUENT_QUEUE_BACKOFF_MS = 10

# (client, variant) in the order each group runs them.
CLIENTS: list[tuple[str, str | None]] = [
    (CONFLUENT, None),
    (AIOKAFKA, None),
    (PYKAF, "next_batch"),
    (PYKAF, "columnar"),
    (PYKAF, "iter"),
    (PYKAF, "sync"),
    (PYKAF, "raw-fetch"),
    (CONFLUENT, "group"),
    (PYKAF, "group"),
]
GROUP = "group"  # the consumer-group variants: subscribe, join, read, commit
# ratios.py pairs equal params only: assign with assign, group with group.
ASSIGN_PARAMS = "assign"
GROUP_PARAMS = "group"
RAW_PARAMS = "decode=none"  # no peer has these params: ratios.py pairs raw-fetch with nothing

# Group settings. Tansu answers a JoinGroup into an empty group only after
# ceil(session timeout / 2) whole seconds, at least 1 s (see the docstring): at
# the default 45 s session that is 23 s a round, so both group clients run
# with a 2 s session there (1 s, the least Tansu waits) and heartbeat every
# 0.5 s. On the mock they keep their defaults, and the mock's initial
# rebalance delay (3 s by default) is 0: one member has nobody to wait for.
GROUP_SESSION_S = {"tansu": 2.0}
GROUP_HEARTBEAT_S = 0.5
MOCK_GROUP_DELAY_MS = 0

_FETCH = 1
_FETCH_VERSION = 11  # topics by name; both brokers accept it
# A v2 batch header: baseOffset int64, batchLength int32 ... lastOffsetDelta
# int32 at byte 23, recordCount int32 at byte 57.
_BATCH_START = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_BATCH_HEADER_SIZE = 61

_topic_ids = itertools.count()


# -- the data set ---------------------------------------------------------------------
@dataclass(frozen=True)
class Dataset:
    """A topic holding the records every round reads."""

    broker: BenchBroker
    topic: str
    ends: dict[int, int]  # partition -> high watermark; every partition starts at 0

    @property
    def records(self) -> int:
        return sum(self.ends.values())

    @property
    def value_bytes(self) -> int:
        return self.records * VALUE_SIZE

    @property
    def partitions(self) -> list[int]:
        return sorted(self.ends)


def _fill(bootstrap: str, topic: str, partitions: int) -> tuple[int, list[int]]:
    """Produce the records with confluent-kafka, an equal share into each partition.

    Returns (acknowledged, each partition's log start offset). The data is the
    peer's, written as librdkafka batches it (its defaults, acks=all,
    idempotent): no client reads batches shaped by its own producer.
    """
    ck = importlib.import_module("confluent_kafka")
    values = bulk_values(RECORDS, VALUE_SIZE).values
    share = RECORDS // partitions
    acked = [0]
    failed: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked[0] += 1
        else:
            failed.append(error)

    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    )
    produce, poll = producer.produce, producer.poll
    for p in range(partitions):
        for value in values[p * share : (p + 1) * share]:
            while True:
                try:
                    produce(topic, value, partition=p, callback=delivered)
                    break
                except BufferError:
                    poll(0.1)
    left = producer.flush(ROUND_TIMEOUT_S)
    assert left == 0 and not failed, f"the setup's producer: {left} left, errors {failed[:3]}"
    return acked[0], trio.run(_starts, bootstrap, topic, partitions)


async def _starts(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Each partition's log start offset."""
    pykaf = importlib.import_module("pykaf")
    async with pykaf.open_client(bootstrap) as client:
        await client.refresh_metadata(topic)
        return [await client.get_offset(topic, p, pykaf.OLDEST) for p in range(partitions)]


def _prepare(broker: BenchBroker, name: str) -> Dataset:
    partitions = PARTITIONS[name]
    assert RECORDS % partitions == 0
    topic = f"bench-consume-{name}-{next(_topic_ids)}"
    broker.create_topic(topic, partitions)
    delivered, starts = _fill(broker.bootstrap, topic, partitions)
    assert delivered == RECORDS, f"the setup produced {delivered} of {RECORDS} records"
    marks = broker.high_watermarks(topic)
    share = RECORDS // partitions
    assert marks == dict.fromkeys(range(partitions), share), (
        f"{topic}: high watermarks {marks}, expected {share} in each partition"
    )
    assert starts == [0] * partitions, (
        f"{topic}: log start offsets {starts}: the broker dropped records "
        "(the mock keeps 5 MiB a partition)"
    )
    return Dataset(broker, topic, marks)


@pytest.fixture(scope="session")  # outlives ``datasets``, which deletes its topic
def consumer_mock() -> Iterator[BenchBroker]:
    """This module's mock cluster: 3 brokers, no initial rebalance delay for groups.

    Its own, not the session's ``bench_mock``: the delay is the cluster's, and
    the producer benchmarks run with librdkafka's default there.
    """
    pytest.importorskip("confluent_kafka", reason="the mock cluster comes with confluent-kafka")
    broker: BenchBroker = importlib.import_module("bench._brokers").MockBench(3)
    try:
        broker.set_group_initial_rebalance_delay(MOCK_GROUP_DELAY_MS)
        yield broker
    finally:
        broker.close()


_BROKER_FIXTURES = {"tansu": "bench_tansu", "mock": "consumer_mock", "fake": "bench_fake"}


@pytest.fixture(scope="module")
def datasets(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Dataset]]:
    """The topic of each broker, produced on first use and deleted after the module."""
    made: dict[str, Dataset] = {}

    def get(name: str) -> Dataset:
        if name not in made:
            made[name] = _prepare(request.getfixturevalue(_BROKER_FIXTURES[name]), name)
        return made[name]

    yield get
    for dataset in made.values():
        dataset.broker.delete_topic(dataset.topic)


# -- the rounds ---------------------------------------------------------------------
# Each client is a Round: start() opens a consumer and fetches the topic's
# metadata (outside the timing), run() reads every record from offset 0 (the
# timed part), stop() closes the consumer and returns (records, value bytes)
# read (outside the timing again).


class Round:
    """One round of one client: a consumer opened, used once, closed."""

    def __init__(self, dataset: Dataset) -> None:
        self.data = dataset
        self.bootstrap = dataset.broker.bootstrap
        self.topic = dataset.topic
        self.notes: dict[str, Any] = {}
        self.result = (0, 0)

    def start(self) -> None:
        """Open the consumer; know the topic."""
        raise NotImplementedError

    def run(self) -> None:
        """Read every record from offset 0."""
        raise NotImplementedError

    def stop(self) -> tuple[int, int]:
        """Close the consumer; return (records, value bytes) read."""
        raise NotImplementedError


class _Gate:
    """Hands an event loop running in a thread from start() to run() to stop()."""

    def __init__(self) -> None:
        self.ready = threading.Event()  # the consumer is open
        self.go = threading.Event()  # run() was called
        self.done = threading.Event()  # every record read (or an error)
        self.error: BaseException | None = None

    def wait(self, event: threading.Event) -> None:
        if not event.wait(ROUND_TIMEOUT_S):
            raise TimeoutError(f"the consumer thread did not answer in {ROUND_TIMEOUT_S} s")
        if self.error is not None:
            raise self.error


class _ThreadedRound(Round):
    """A round of an async client, whose event loop runs in a thread of its own."""

    def start(self) -> None:
        self.gate = _Gate()
        self.thread = threading.Thread(target=self._main, name="consumer bench", daemon=True)
        self.thread.start()
        self.gate.wait(self.gate.ready)

    def run(self) -> None:
        self.gate.go.set()
        self.gate.wait(self.gate.done)

    def stop(self) -> tuple[int, int]:
        self.gate.go.set()  # a round set up but never run (an error between) must end too
        self.thread.join(ROUND_TIMEOUT_S)
        if self.thread.is_alive():
            raise TimeoutError(f"the consumer did not close in {ROUND_TIMEOUT_S} s")
        if self.gate.error is not None:
            raise self.gate.error
        return self.result

    def _main(self) -> None:
        try:
            self.loop_main()
        except BaseException as exc:
            self.gate.error = exc
        finally:
            self.gate.ready.set()
            self.gate.done.set()

    def loop_main(self) -> None:
        """Run the event loop: open, ready, wait for go, read, done, close."""
        raise NotImplementedError


class ConfluentRound(Round):
    """confluent-kafka: assign() at offset 0, consume() in batches, every value's len."""

    def config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": "pykaf-bench",  # required; nothing is committed
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "check.crcs": True,
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
            "fetch.wait.max.ms": int(FETCH_MAX_WAIT_S * 1000),
            "fetch.queue.backoff.ms": CONFLUENT_QUEUE_BACKOFF_MS,
        }

    def start(self) -> None:
        self.ck = importlib.import_module("confluent_kafka")
        self.consumer = self.ck.Consumer(self.config())
        metadata = self.consumer.list_topics(self.topic, timeout=30)
        assert len(metadata.topics[self.topic].partitions) == len(self.data.ends)

    def run(self) -> None:
        tp = self.ck.TopicPartition
        self.consumer.assign([tp(self.topic, p, 0) for p in self.data.partitions])
        self.result = self.read()

    def read(self) -> tuple[int, int]:
        """consume() until every record is in; return (records, value bytes)."""
        consumer = self.consumer
        total = self.data.records
        deadline = time.monotonic() + ROUND_TIMEOUT_S
        count = size = 0
        while count < total:
            messages = consumer.consume(num_messages=CONSUME_BATCH, timeout=1.0)
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"confluent-kafka: {message.error()}")
                size += len(message.value())
            count += len(messages)
            if time.monotonic() > deadline:
                break
        return count, size

    def stop(self) -> tuple[int, int]:
        self.consumer.close()
        return self.result


class ConfluentGroupRound(ConfluentRound):
    """confluent-kafka in a fresh group: subscribe(), consume() in batches, auto-commit on."""

    def config(self) -> dict[str, Any]:
        config = super().config()
        del config["enable.auto.commit"]  # the default: on, every 5 s
        config["group.id"] = f"bench-group-{uuid.uuid4().hex}"  # no committed offsets
        config["auto.offset.reset"] = "earliest"
        config.update(confluent_group_options(self.data.broker.name))
        return config

    def run(self) -> None:
        started = time.perf_counter()
        assigned: list[float] = []
        self.consumer.subscribe(
            [self.topic], on_assign=lambda consumer, parts: assigned.append(time.perf_counter())
        )
        self.result = self.read()
        done = time.perf_counter()
        self.notes["generations"] = len(assigned)
        if assigned:
            self.notes["join_s"] = assigned[0] - started
            self.notes["read_s"] = done - assigned[0]

    def stop(self) -> tuple[int, int]:
        """Commit what was read (outside the timing), check the group's offsets, close."""
        ck = self.ck
        consumer = self.consumer
        try:
            try:
                consumer.commit(asynchronous=False)
            except ck.KafkaException as exc:  # nothing new since the last auto-commit
                if exc.args[0].code() != ck.KafkaError._NO_OFFSET:
                    raise
            parts = [ck.TopicPartition(self.topic, p) for p in self.data.partitions]
            committed = consumer.committed(parts, timeout=30)
            self.notes["committed"] = {tp.partition: tp.offset for tp in committed}
        finally:
            consumer.close()
        return self.result


class AiokafkaRound(_ThreadedRound):
    """aiokafka: assign(), seek_to_beginning(), getmany() in batches, every value's len."""

    def loop_main(self) -> None:
        asyncio.run(self._main_async())

    async def _main_async(self) -> None:
        aio = importlib.import_module("aiokafka")
        consumer = aio.AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_uncommitted",
            check_crcs=True,
            fetch_max_bytes=FETCH_MAX_BYTES,
            max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
            fetch_max_wait_ms=int(FETCH_MAX_WAIT_S * 1000),
        )
        await consumer.start()
        try:
            # The metadata it fetches at start() may leave the topic out (it does on
            # the mock); assign() then asks for it: one round trip within the round.
            assert self.topic in await consumer.topics()
            self.gate.ready.set()
            await asyncio.to_thread(self.gate.go.wait)
            tps = [aio.TopicPartition(self.topic, p) for p in self.data.partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            self.result = await asyncio.wait_for(self._read(consumer), ROUND_TIMEOUT_S)
            self.gate.done.set()
        finally:
            await consumer.stop()

    async def _read(self, consumer: Any) -> tuple[int, int]:
        total = self.data.records
        count = size = 0
        while count < total:
            got = await consumer.getmany(timeout_ms=1000, max_records=CONSUME_BATCH)
            for messages in got.values():
                for message in messages:
                    size += len(message.value)
                count += len(messages)
        return count, size


def pykaf_consumer_options() -> dict[str, Any]:
    """pykaf's consumer settings in these benchmarks."""
    return {
        "fetch_max_bytes": FETCH_MAX_BYTES,
        "max_partition_fetch_bytes": PARTITION_FETCH_BYTES,
        "fetch_max_wait": FETCH_MAX_WAIT_S,
        "isolation_level": "read_uncommitted",
    }


class _PykafRound(_ThreadedRound):
    """pykaf's consumer on trio: one task per partition, each with its partition consumer."""

    def loop_main(self) -> None:
        trio.run(self._main_async)

    def options(self) -> dict[str, Any]:
        """The consumer's settings (``bench/test_kafka.py`` changes them)."""
        return pykaf_consumer_options()

    async def _main_async(self) -> None:
        pykaf = importlib.import_module("pykaf")
        async with pykaf.open_consumer(self.bootstrap, **self.options()) as consumer:
            partitions = await consumer.partitions(self.topic)
            assert sorted(partitions) == self.data.partitions, partitions
            self.gate.ready.set()
            await trio.to_thread.run_sync(self.gate.go.wait)
            totals = [0, 0]
            with trio.fail_after(ROUND_TIMEOUT_S):
                async with trio.open_nursery() as nursery:
                    for p in self.data.partitions:
                        nursery.start_soon(self._partition, consumer, p, totals, pykaf.OLDEST)
            self.result = (totals[0], totals[1])
            self.gate.done.set()
            self.note_statistics(consumer.statistics())

    def note_statistics(self, stats: Any) -> None:
        """Outside the timing: what the consumer's statistics say, into ``notes``."""
        self.notes["fetch_requests"] = sum(b["requests"] for b in stats.brokers.values())
        self.notes["fetched_mb"] = round(sum(b["bytes"] for b in stats.brokers.values()) / 1e6, 1)

    async def _partition(
        self, consumer: Any, partition: int, totals: list[int], oldest: int
    ) -> None:
        pc = await consumer.consume_partition(self.topic, partition, oldest)
        count, size = await self.read(pc, self.data.ends[partition])
        totals[0] += count
        totals[1] += size

    async def read(self, pc: Any, end: int) -> tuple[int, int]:
        """Read ``pc`` up to offset ``end``; return (records, value bytes)."""
        raise NotImplementedError


class PykafNextBatchRound(_PykafRound):
    """``await pc.next_batch()`` until the end offset, a loop over each list."""

    async def read(self, pc: Any, end: int) -> tuple[int, int]:
        count = size = 0
        last = end - 1
        while True:
            batch = await pc.next_batch()
            for record in batch:
                size += len(record.value)
            count += len(batch)
            if batch[-1].offset >= last:
                return count, size


class PykafColumnarRound(_PykafRound):
    """``await pc.next_batch(columnar=True)`` until the end offset: ColumnBatches, no Record.

    The value bytes come from the values column's offsets (what a columnar
    reader does), not from a ``len()`` per record.
    """

    async def read(self, pc: Any, end: int) -> tuple[int, int]:
        count = size = 0
        last = end - 1
        while True:
            batch = await pc.next_batch(columnar=True)
            n = len(batch)
            size += batch.values.span_bytes(0, n)
            count += n
            if batch.offsets[n - 1] >= last:
                return count, size


class PykafIterRound(_PykafRound):
    """``async for record in pc`` until the end offset."""

    async def read(self, pc: Any, end: int) -> tuple[int, int]:
        count = size = 0
        last = end - 1
        async for record in pc:
            size += len(record.value)
            count += 1
            if record.offset >= last:
                break
        return count, size


class PykafSyncRound(Round):
    """``pykaf.sync.Consumer``: assign() every partition at OLDEST, consume() in batches.

    The blocking facade from the benchmark's own thread, the way a script
    reads: ``consume(max_records=CONSUME_BATCH, timeout=1.0)`` until every
    record is in, as the confluent-kafka round does.
    """

    def options(self) -> dict[str, Any]:
        """The consumer's settings (``bench/test_kafka.py`` changes them)."""
        return pykaf_consumer_options()

    def start(self) -> None:
        self.pykaf = importlib.import_module("pykaf")
        sync = importlib.import_module("pykaf.sync")
        self.consumer = sync.Consumer(self.bootstrap, **self.options())

    def run(self) -> None:
        oldest = self.pykaf.OLDEST
        self.consumer.assign([(self.topic, p, oldest) for p in self.data.partitions])
        total = self.data.records
        deadline = time.monotonic() + ROUND_TIMEOUT_S
        count = size = 0
        while count < total and time.monotonic() < deadline:
            records = self.consumer.consume(CONSUME_BATCH, timeout=1.0)
            for record in records:
                size += len(record.value)
            count += len(records)
        self.result = (count, size)

    def stop(self) -> tuple[int, int]:
        self.consumer.close()
        return self.result


def pykaf_group_options(broker_name: str) -> dict[str, Any]:
    """pykaf's group settings on ``broker_name``: the consumer's, plus the group's."""
    options = {**pykaf_consumer_options(), "auto_offset_reset": "earliest"}
    if broker_name in GROUP_SESSION_S:
        options["session_timeout"] = GROUP_SESSION_S[broker_name]
        options["heartbeat_interval"] = GROUP_HEARTBEAT_S
    return options


def confluent_group_options(broker_name: str) -> dict[str, Any]:
    """confluent-kafka's group settings on ``broker_name`` beyond its fetch settings."""
    if broker_name not in GROUP_SESSION_S:
        return {}
    return {
        "session.timeout.ms": int(GROUP_SESSION_S[broker_name] * 1000),
        "heartbeat.interval.ms": int(GROUP_HEARTBEAT_S * 1000),
    }


class _GroupHandler:
    """A sarama-style handler reading every claim up to its partition's end offset."""

    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = ends
        self.count = self.size = 0
        self.unfinished = set(ends)
        self.all_read = trio.Event()
        self.generations = 0
        self.joined: float | None = None  # perf_counter() at the first setup()

    async def setup(self, session: Any) -> None:
        self.generations += 1
        if self.joined is None:
            self.joined = time.perf_counter()

    async def consume_claim(self, session: Any, claim: Any) -> None:
        last = self.ends[claim.partition] - 1
        count = size = 0
        while True:
            batch = await claim.next_batch()
            if not batch:  # revoked before its end: the round's counts come out short
                return
            for record in batch:
                size += len(record.value)
            count += len(batch)
            session.mark_message(batch[-1])
            if batch[-1].offset >= last:
                break
        self.count += count
        self.size += size
        self.unfinished.discard(claim.partition)
        if not self.unfinished:
            self.all_read.set()

    async def cleanup(self, session: Any) -> None:
        return None


class PykafGroupRound(_ThreadedRound):
    """``pykaf.open_consumer_group`` in a fresh group, a handler per claim, auto-commit on."""

    def loop_main(self) -> None:
        trio.run(self._main_async)

    async def _main_async(self) -> None:
        pykaf = importlib.import_module("pykaf")
        group_id = f"bench-group-{uuid.uuid4().hex}"  # no committed offsets: from 0
        options = pykaf_group_options(self.data.broker.name)
        async with pykaf.open_consumer_group(
            self.bootstrap, group_id, [self.topic], **options
        ) as group:
            # Outside the timing, as the other clients' open: the topic's metadata
            # and the coordinator's connection (librdkafka looks the coordinator
            # up as soon as its consumer is created).
            client = group.client
            await client.refresh_metadata(self.topic)
            assert sorted(await client.partitions(self.topic)) == self.data.partitions
            await client.connect_to(await client.coordinator(group_id))
            handler = _GroupHandler(self.data.ends)
            self.gate.ready.set()
            await trio.to_thread.run_sync(self.gate.go.wait)
            async with trio.open_nursery() as nursery:
                started = time.perf_counter()
                nursery.start_soon(group.consume, handler)
                with trio.fail_after(ROUND_TIMEOUT_S):
                    await handler.all_read.wait()
                done = time.perf_counter()
                self.result = (handler.count, handler.size)
                self.gate.done.set()
                # Outside the timing: consume's cancellation commits the marks and
                # leaves the group. (Not group.aclose(): inside this block it
                # cancels the rest of the block too; see the docstring.)
                nursery.cancel_scope.cancel()
            committed = await group.offsets.fetch([(self.topic, p) for p in self.data.partitions])
            self.notes["committed"] = {
                p: committed.get((self.topic, p), -1) for p in self.data.ends
            }
            self.notes["generations"] = handler.generations
            if handler.joined is not None:
                self.notes["join_s"] = handler.joined - started
                self.notes["read_s"] = done - handler.joined


class RawFetchRound(_ThreadedRound):
    """Bare Fetch requests through pykaf's client: no record decoded (informational).

    One request in flight per broker, the brokers in parallel, as pykaf's
    consumer fetches. Each answer's batch headers give the record counts and
    the next offset; the bytes are those of the record sets received.
    """

    def loop_main(self) -> None:
        trio.run(self._main_async)

    async def _main_async(self) -> None:
        pykaf = importlib.import_module("pykaf")
        async with pykaf.open_client(self.bootstrap) as client:
            await client.refresh_metadata(self.topic)
            by_leader: dict[int, list[int]] = {}
            for p in self.data.partitions:
                leader = await client.leader(self.topic, p)
                by_leader.setdefault(leader.node_id, []).append(p)
            conns = {node: await client.broker_connection(node) for node in by_leader}
            self.gate.ready.set()
            await trio.to_thread.run_sync(self.gate.go.wait)
            totals = [0, 0, 0]  # records, record-set bytes, requests
            with trio.fail_after(ROUND_TIMEOUT_S):
                async with trio.open_nursery() as nursery:
                    for node, parts in by_leader.items():
                        nursery.start_soon(self._fetch_all, conns[node], parts, totals)
            self.result = (totals[0], totals[1])
            self.gate.done.set()
            self.notes["fetch_requests"] = totals[2]

    async def _fetch_all(self, conn: Any, partitions: list[int], totals: list[int]) -> None:
        protocol = importlib.import_module("pykaf.protocol")
        errors = importlib.import_module("pykaf.errors")
        version = min(_FETCH_VERSION, conn.version_for(_FETCH))
        ends = self.data.ends
        offsets = dict.fromkeys(partitions, 0)
        while True:
            wanted = [p for p in partitions if offsets[p] < ends[p]]
            if not wanted:
                return
            request = protocol.FetchRequest(
                max_wait_ms=int(FETCH_MAX_WAIT_S * 1000),
                min_bytes=1,
                max_bytes=FETCH_MAX_BYTES,
                isolation_level=0,
                topics=[
                    protocol.FetchTopic(
                        topic=self.topic,
                        partitions=[
                            protocol.FetchPartition(
                                partition=p,
                                fetch_offset=offsets[p],
                                partition_max_bytes=PARTITION_FETCH_BYTES,
                            )
                            for p in wanted
                        ],
                    )
                ],
            )
            response = await conn.request(request, version)
            totals[2] += 1
            for topic_response in response.responses:
                for part in topic_response.partitions:
                    err = errors.error_for_code(part.error_code)
                    if err is not None:
                        raise err(f"Fetch {self.topic}/{part.partition_index}: {err.description}")
                    data = part.records or b""
                    count, next_offset = _walk_batches(data, offsets[part.partition_index])
                    totals[0] += count
                    totals[1] += len(data)
                    offsets[part.partition_index] = next_offset


def _walk_batches(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    """The records of the complete batches in ``data`` at or after ``offset``, and the next offset.

    Only the headers are read. A batch cut short by the fetch size is left for
    the next request; so is everything when no batch is complete.
    """
    pos = count = 0
    size = len(data)
    while pos + _BATCH_HEADER_SIZE <= size:
        base, length = _BATCH_START.unpack_from(data, pos)
        end = pos + 12 + length
        if end > size:
            break
        last = base + _INT32.unpack_from(data, pos + 23)[0]
        if base >= offset:  # whole batches only: every fetch starts at a batch's base
            count += _INT32.unpack_from(data, pos + 57)[0]
        offset = max(offset, last + 1)
        pos = end
    return count, offset


def _round_factory(client: str, variant: str | None) -> Callable[[Dataset], Round]:
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
        return ConfluentGroupRound if variant == GROUP else ConfluentRound
    if client == AIOKAFKA:
        pytest.importorskip("aiokafka")
        return AiokafkaRound
    pykaf = importlib.import_module("pykaf")
    if not hasattr(pykaf, "open_consumer"):
        pytest.skip("pykaf.open_consumer does not exist yet")
    if variant == GROUP and not hasattr(pykaf, "open_consumer_group"):
        pytest.skip("pykaf.open_consumer_group does not exist yet")
    rounds: dict[str | None, Callable[[Dataset], Round]] = {
        "next_batch": PykafNextBatchRound,
        "columnar": PykafColumnarRound,
        "iter": PykafIterRound,
        "sync": PykafSyncRound,
        "raw-fetch": RawFetchRound,
        GROUP: PykafGroupRound,
    }
    return rounds[variant]


def _params(variant: str | None) -> str:
    """What ratios.py pairs on: assign with assign, group with group, raw-fetch with nothing."""
    if variant == "raw-fetch":
        return RAW_PARAMS
    return GROUP_PARAMS if variant == GROUP else ASSIGN_PARAMS


def _settings(client: str, variant: str | None, broker_name: str) -> dict[str, Any]:
    """The client's non-default settings, for ``extra_info``."""
    if client == CONFLUENT:
        settings = {
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
            "isolation.level": "read_uncommitted",
            "check.crcs": True,
            "fetch.queue.backoff.ms": CONFLUENT_QUEUE_BACKOFF_MS,
            "num_messages": CONSUME_BATCH,
        }
        if variant == GROUP:
            settings["auto.offset.reset"] = "earliest"
            settings.update(confluent_group_options(broker_name))
        return settings
    if client == AIOKAFKA:
        return {
            "fetch_max_bytes": FETCH_MAX_BYTES,
            "max_partition_fetch_bytes": PARTITION_FETCH_BYTES,
            "max_records": CONSUME_BATCH,
        }
    if variant == GROUP:
        return pykaf_group_options(broker_name)
    return pykaf_consumer_options()


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# -- the benchmark ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("broker_name", "client", "variant"),
    [
        pytest.param(b, c, v, id=f"{b}-{c}-{v}" if v else f"{b}-{c}")
        for b in BROKERS
        for c, v in CLIENTS
    ],
)
def test_consume(
    benchmark: Any,
    datasets: Callable[[str], Dataset],
    broker_name: str,
    client: str,
    variant: str | None,
) -> None:
    make_round = _round_factory(client, variant)
    data = datasets(broker_name)
    raw = variant == "raw-fetch"
    group = variant == GROUP
    tag(
        benchmark,
        group=f"consume-1M-{broker_name}",
        client=client,
        records=data.records,
        variant=variant,
        params=_params(variant),
        value_bytes=VALUE_SIZE,
        partitions=len(data.ends),
        settings=_settings(client, variant, broker_name),
    )

    current: list[Round] = []  # the round set up and not torn down yet
    results: list[tuple[int, int]] = []
    joins: list[float] = []  # group rounds: seconds from subscribe/consume to the assignment
    reads: list[float] = []  # and from the assignment to the last record

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        one = make_round(data)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: Round) -> None:
        """Outside the timing: close the consumer, check what it read."""
        current.remove(one)
        count, size = one.stop()
        results.append((count, size))
        assert count == data.records, (
            f"{client}: read {count} records of {data.records} from {data.topic}"
        )
        if raw:  # record sets: values plus batch and record headers
            assert size > data.value_bytes, f"raw fetch: {size} bytes for {count} records"
        else:
            assert size == data.value_bytes, (
                f"{client}: the values read add up to {size} bytes, expected {data.value_bytes}"
            )
        if group:
            notes = one.notes
            assert notes.get("generations") == 1, (
                f"{client}: {notes.get('generations')} assignments in one round (a rebalance?)"
            )
            assert notes.get("committed") == data.ends, (
                f"{client}: the group committed {notes.get('committed')}, expected {data.ends}"
            )
            joins.append(notes.pop("join_s"))
            reads.append(notes.pop("read_s"))
            del notes["committed"]
        benchmark.extra_info.update(one.notes)  # the last round's

    cpu = CpuMeter()

    def one_round(one: Round) -> None:
        cpu.run(one.run)

    benchmark.pedantic(one_round, setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1)
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])

    assert results, f"{client}: no round completed"
    if raw:
        benchmark.extra_info["record_set_bytes"] = results[-1][1]
        stats = getattr(benchmark, "stats", None)
        if stats is not None and stats.stats.median > 0:
            benchmark.extra_info["mb_per_s"] = round(results[-1][1] / stats.stats.median / 1e6)
    if group:  # the join, broker's wait included, and the reading after it (medians)
        benchmark.extra_info["join_s"] = round(_median(joins), 4)
        benchmark.extra_info["read_s"] = round(_median(reads), 4)
        benchmark.extra_info["records_per_s_after_join"] = round(data.records / _median(reads))
    note_rate(benchmark, data.records)
    cpu.note(benchmark, data.records)
