"""Producer benchmarks: 1,000,000 records into a real broker, pykaf against its peers.

Cases (one pytest-benchmark group per broker, every client on the same broker
in the same run, back to back):

* ``produce-1M-tansu``: a Tansu broker (memory storage, one node).
* ``produce-1M-mock``: librdkafka's mock cluster (3 brokers, leaders spread).

One call produces 1,000,000 records of 100-byte values (random bytes, no keys,
no headers, no compression) with acks=all into a fresh 4-partition topic, and
returns once every record is acknowledged. Opening and closing the producer
are not timed: before the call (pytest-benchmark's ``setup``) each client opens
a producer and sends one record to each partition, waiting for them, so that
it is connected to every leader, holds its idempotent producer id and knows
the topic; after it (``teardown``) the producer is closed. Startup is not
throughput, and it differs a lot between clients: an idempotent
confluent-kafka producer takes ~500 ms to send its first record to Tansu
(20 ms for pykaf, 12 ms for aiokafka), a quarter of its round.

The asyncio and trio clients keep their event loop open from ``setup`` to
``teardown``, so it runs in a thread of its own; the benchmark's thread only
waits for it (blocked on an event, not holding the GIL).

Clients and settings (each client's defaults otherwise):

* ``confluent-kafka`` (librdkafka): ``produce()`` in a loop, ``poll(0)`` and
  retry on ``BufferError`` (its queue holds 100,000 messages by default), then
  ``flush()``. linger.ms=5, acks=all, enable.idempotence=true.
* ``confluent-kafka[poll]``: its documented idiom, ``poll(0)`` after every
  ``produce()`` (on ``BufferError``, ``poll(0.1)`` and again), as
  ``bench/test_kafka.py`` runs it: the peer of pykaf's per-record sync paths.
* ``confluent-kafka[poll_cb]``: the same with a delivery callback per record
  (``produce(..., callback=...)``, as confluent-kafka's README does), which
  counts the acknowledged records and keeps the first error: the peer of
  ``sync_produce_cb``.
* ``aiokafka``: ``await send()`` per record, collecting the futures, then
  ``flush()`` and ``gather``; on asyncio, started by ``asyncio.run`` in the
  timed call. linger_ms=5, acks="all", enable_idempotence=True on the mock;
  **on Tansu without idempotence**: aiokafka asks for a producer id with
  InitProducerId v0, which Tansu answers UNKNOWN_SERVER_ERROR (it only
  implements v3-v5), so aiokafka cannot start idempotent there. aiokafka sends
  200,000 records, not 1,000,000: it runs at 30-60k records/s and a round
  would take 20-30 s (ratios and records/s are per record).
* ``pykaf`` (``pykaf.open_producer``, linger=0.005, acks="all", idempotence on,
  as its defaults are), four ways:

  - ``send_nowait``: ``send_nowait()`` per record; on ``BufferFullError`` it
    yields to the producer until there is room, then ``flush()``.
  - ``send_nowait_cb``: the same with ``on_delivery=`` a counting callback
    per record, which must hear of every record acknowledged (the peer of
    ``confluent-kafka[poll_cb]``).
  - ``send_batch``: ``await send_batch()`` on lists of 10,000 values, then
    ``flush()`` and every batch's ``wait()``.
  - ``sync``: the blocking facade ``pykaf.sync.Producer``: ``send_async()``
    per record (a ``concurrent.futures.Future`` each, kept and checked after
    the round, as aiokafka's are), then ``flush()``. 100,000 records a round: it ran at
    ~25k records/s when written (a 1M round would take 40 s), ~110k/s since
    issue 19 (a future per record still, resolved per settled batch).
  - ``sync_many``: ``pykaf.sync.Producer.send_many()`` on lists of 10,000
    values (each call blocks until its records are acknowledged).
  - ``sync_produce``: ``pykaf.sync.Producer.produce()`` and ``poll(0)`` per
    record, then ``flush()`` (which must return 0): confluent-kafka's idiom
    on pykaf's blocking facade.
  - ``sync_produce_cb``: the same with ``on_delivery=`` a callback per record
    (the one ``confluent-kafka[poll_cb]`` uses), which must hear of every
    record acknowledged.

Each round produces into a topic of its own, created before and deleted after
it (outside the timing). After each round the topic's high watermarks must
add up to the records sent (plus the 4 warm-up records), read from Fetch
responses (Tansu's ListOffsets
is wrong for multi-record batches; see ``bench/_brokers.py``), and each
client must report every record acknowledged (confluent-kafka: nothing left
in flush; aiokafka: every future resolved; pykaf: flush raised nothing, every
batch's ``wait()`` counted its records). A producer that loses records fails;
it cannot post a fast time.

``extra_info["peak_rss_growth_mb"]``: the largest growth of the process's
peak RSS (VmHWM, reset through /proc/self/clear_refs once the producer is warm)
over a round, against the RSS at its start: how much memory sending took on
top of the values, which exist before the round starts (about 130 MB as 1M
bytes objects). pykaf's buffer is bounded (``buffer_bytes``, recorded too);
for aiokafka and pykaf ``sync`` it includes the per-record futures the
benchmark keeps. The brokers run in other processes and are not counted.
``extra_info`` also holds pykaf's statistics of the last round (batches sent,
records per batch, retries, errors) and how often a full buffer made the loop
wait (``buffer_full_retries``).
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import threading
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

import pytest
import trio

from bench._support import (
    AIOKAFKA,
    PYKAF,
    CpuMeter,
    bulk_values,
    confluent_produce_all,
    confluent_produce_idiom,
    note_rate,
    reset_peak_rss,
    status_kb,
    tag,
)

CONFLUENT = "confluent-kafka"
RECORDS = 1_000_000
# Fewer records for the slow clients, to keep the run short (ratios are per record):
# aiokafka runs at ~50k records/s, pykaf.sync's send_async per record at ~110k/s.
SHORT_RECORDS: dict[tuple[str, str | None], int] = {
    (AIOKAFKA, None): 200_000,
    (PYKAF, "sync"): 100_000,
}
VALUE_SIZE = 100
PARTITIONS = 4
ROUNDS = 5
LINGER_S = 0.005
CHUNK = 10_000  # values per send_batch call
BROKERS = ("tansu", "mock")
ROUND_TIMEOUT_S = 120.0  # a stuck producer fails its round instead of hanging the run

# (client, variant) in the order each group runs them.
CLIENTS: list[tuple[str, str | None]] = [
    (CONFLUENT, None),
    (CONFLUENT, "poll"),
    (CONFLUENT, "poll_cb"),
    (AIOKAFKA, None),
    (PYKAF, "send_nowait"),
    (PYKAF, "send_nowait_cb"),
    (PYKAF, "send_batch"),
    (PYKAF, "sync"),
    (PYKAF, "sync_many"),
    (PYKAF, "sync_produce"),
    (PYKAF, "sync_produce_cb"),
]

_topic_ids = itertools.count()


# -- loading the clients ---------------------------------------------------------------
def _load_pykaf_producer() -> ModuleType:
    """pykaf with its producer, or a skip saying why not."""
    import pykaf

    if not hasattr(pykaf, "open_producer"):
        pytest.skip("pykaf.open_producer does not exist yet (the producer is not exported)")
    return pykaf


def _load_pykaf_sync() -> ModuleType:
    """``pykaf.sync`` with its Producer, or a skip saying why not."""
    _load_pykaf_producer()
    try:
        sync = importlib.import_module("pykaf.sync")
    except ImportError as exc:
        pytest.skip(f"pykaf.sync did not import ({exc})")
    if not hasattr(sync, "Producer"):
        pytest.skip("pykaf.sync has no Producer yet")
    return sync


# -- the producers ------------------------------------------------------------------------
# Each client is a Round class: start() opens a producer and warms it up (outside
# the timing), run() sends the records and waits for every acknowledgement (the
# timed part), stop() closes the producer and returns the records acknowledged
# (outside the timing again).


def _warm_value(values: list[bytes]) -> bytes:
    return values[0]


class Round:
    """One round of one client: a producer opened, warmed up, used once, closed."""

    #: The topic's partitions: the warm-up sends one record to each.
    partitions = PARTITIONS

    def __init__(self, bootstrap: str, topic: str, values: list[bytes]) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.values = values
        self.notes: dict[str, Any] = {}

    def start(self) -> None:
        """Open the producer; send one record to each partition and wait for them."""
        raise NotImplementedError

    def run(self) -> None:
        """Send ``values``; return once every record is acknowledged."""
        raise NotImplementedError

    def stop(self) -> int:
        """Close the producer; return how many of ``values`` it says were acknowledged."""
        raise NotImplementedError


class _Gate:
    """Hands an event loop running in a thread from start() to run() to stop()."""

    def __init__(self) -> None:
        self.ready = threading.Event()  # the producer is open and warm
        self.go = threading.Event()  # run() was called
        self.done = threading.Event()  # every record acknowledged (or an error)
        self.result = 0
        self.error: BaseException | None = None

    def wait(self, event: threading.Event) -> None:
        if not event.wait(ROUND_TIMEOUT_S):
            raise TimeoutError(f"the producer thread did not answer in {ROUND_TIMEOUT_S} s")
        if self.error is not None:
            raise self.error


class _ThreadedRound(Round):
    """A round of an async client, whose event loop runs in a thread of its own.

    The loop must outlive start() and run() (the producer stays open between
    them), so it cannot run in the benchmark's thread; the benchmark's thread
    only waits for it, and the loop's thread does all the work.
    """

    def start(self) -> None:
        self.gate = _Gate()
        self.thread = threading.Thread(target=self._main, name="producer bench", daemon=True)
        self.thread.start()
        self.gate.wait(self.gate.ready)

    def run(self) -> None:
        self.gate.go.set()
        self.gate.wait(self.gate.done)

    def stop(self) -> int:
        self.thread.join(ROUND_TIMEOUT_S)
        if self.thread.is_alive():
            raise TimeoutError(f"the producer did not close in {ROUND_TIMEOUT_S} s")
        if self.gate.error is not None:
            raise self.gate.error
        return self.gate.result

    def _main(self) -> None:
        try:
            self.loop_main()
        except BaseException as exc:
            self.gate.error = exc
        finally:
            self.gate.ready.set()
            self.gate.done.set()

    def loop_main(self) -> None:
        """Run the event loop: open, warm up, ready, wait for go, produce, done, close."""
        raise NotImplementedError


def _pykaf_stats(stats: Any) -> dict[str, Any]:
    """The parts of pykaf's ProducerStatistics worth keeping with a result."""
    return {
        "batches_sent": stats.batches_sent,
        "batch_records_avg": round(stats.batch_records_avg),
        "retries": stats.retries,
        "errors": stats.errors,
        "records_failed": stats.records_failed,
    }


class ConfluentRound(Round):
    """confluent-kafka: produce() per record, poll(0) on BufferError, flush()."""

    idempotence = True

    def start(self) -> None:
        ck = importlib.import_module("confluent_kafka")
        self.producer = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": int(LINGER_S * 1000),
                "acks": "all",
                "enable.idempotence": self.idempotence,
            }
        )
        self.warm_up()

    def warm_up(self) -> None:
        """Send one record to each partition and wait for them (outside the timing)."""
        for partition in range(self.partitions):
            self.producer.produce(self.topic, _warm_value(self.values), partition=partition)
        left = self.producer.flush(ROUND_TIMEOUT_S)
        assert left == 0, "confluent-kafka: the warm-up records were not acknowledged"

    def run(self) -> None:
        full = confluent_produce_all(self.producer, self.topic, self.values)
        self.left = self.producer.flush(ROUND_TIMEOUT_S)
        self.notes["buffer_full_retries"] = full

    def stop(self) -> int:
        del self.producer
        assert self.left == 0, f"confluent-kafka: {self.left} records unacknowledged after flush"
        return len(self.values)


class ConfluentPollRound(ConfluentRound):
    """confluent-kafka's documented idiom: ``produce()`` and ``poll(0)`` per record, ``flush()``."""

    def run(self) -> None:
        full = confluent_produce_idiom(self.producer, self.topic, self.values)
        self.left = self.producer.flush(ROUND_TIMEOUT_S)
        self.notes["buffer_full_retries"] = full


class _DeliveryCounter:
    """A delivery callback: counts acknowledged records, keeps the first error."""

    def __init__(self) -> None:
        self.acked = 0
        self.error: Any = None

    def __call__(self, error: Any, metadata: Any) -> None:
        if error is None:
            self.acked += 1
        elif self.error is None:
            self.error = error


class ConfluentPollCallbackRound(ConfluentRound):
    """``produce(..., callback=)`` and ``poll(0)`` per record, ``flush()`` (confluent's README)."""

    def run(self) -> None:
        self.delivered = _DeliveryCounter()
        full = confluent_produce_idiom(self.producer, self.topic, self.values, self.delivered)
        self.left = self.producer.flush(ROUND_TIMEOUT_S)
        self.notes["buffer_full_retries"] = full

    def stop(self) -> int:
        counted = super().stop()
        assert self.delivered.error is None, f"confluent-kafka: {self.delivered.error}"
        assert self.delivered.acked == counted, (
            f"confluent-kafka: {self.delivered.acked} of {counted} callbacks heard of an ack"
        )
        return self.delivered.acked


class AiokafkaRound(_ThreadedRound):
    """aiokafka: ``await send()`` per record, keeping the futures; flush, gather."""

    linger_ms: int | None = int(LINGER_S * 1000)  # None: aiokafka's default

    def __init__(self, *args: Any, idempotence: bool) -> None:
        super().__init__(*args)
        self.idempotence = idempotence

    def loop_main(self) -> None:
        asyncio.run(self._main_async())

    async def _main_async(self) -> None:
        aio = importlib.import_module("aiokafka")
        linger = {} if self.linger_ms is None else {"linger_ms": self.linger_ms}
        producer = aio.AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=self.idempotence,
            **linger,
        )
        await producer.start()
        try:
            for partition in range(self.partitions):
                await (
                    await producer.send(self.topic, _warm_value(self.values), partition=partition)
                )
            self.gate.ready.set()
            await asyncio.to_thread(self.gate.go.wait)
            self.gate.result = await self.produce(producer)
            self.gate.done.set()
        finally:
            await producer.stop()

    async def produce(self, producer: Any) -> int:
        """Send every value; return how many were acknowledged."""
        topic, send = self.topic, producer.send
        futures = [await send(topic, value) for value in self.values]
        await producer.flush()
        results = await asyncio.gather(*futures)  # raises the first failure
        return len(results)


#: Options every pykaf producer of these rounds gets on top of the defaults
#: below: empty in the suite; ``bench/interleaved.py --pykaf-option`` fills it
#: to try another setting against the same peer rounds.
PYKAF_OPTIONS: dict[str, Any] = {}


def _pykaf_options() -> dict[str, Any]:
    return {"linger": LINGER_S, "acks": "all", "idempotence": True, **PYKAF_OPTIONS}


class _PykafRound(_ThreadedRound):
    """pykaf's async producer, on trio."""

    idempotence = True  # False: for a peer that cannot be idempotent on this broker

    def loop_main(self) -> None:
        trio.run(self._main_async)

    async def _main_async(self) -> None:
        pykaf = importlib.import_module("pykaf")
        options = {**_pykaf_options(), "idempotence": self.idempotence}
        async with pykaf.open_producer(self.bootstrap, **options) as producer:
            await self.warm_up(producer)
            self.gate.ready.set()
            await trio.to_thread.run_sync(self.gate.go.wait)
            with trio.fail_after(ROUND_TIMEOUT_S):
                self.gate.result = await self.produce(producer)
            self.gate.done.set()
            self.notes.update(_pykaf_stats(producer.statistics()))
            self.notes["buffer_bytes"] = producer.config.buffer_bytes

    async def warm_up(self, producer: Any) -> None:
        """Send one record to each partition and wait for them (outside the timing)."""
        for partition in range(self.partitions):
            await producer.send(self.topic, _warm_value(self.values), partition=partition)

    async def produce(self, producer: Any) -> int:
        raise NotImplementedError


class PykafSendNowaitRound(_PykafRound):
    """``send_nowait()`` per record; on BufferFullError yield until there is room."""

    async def produce(self, producer: Any) -> int:
        buffer_full = importlib.import_module("pykaf.errors").BufferFullError
        topic, send = self.topic, producer.send_nowait
        full = 0
        for value in self.values:
            while True:
                try:
                    send(topic, value)
                    break
                except buffer_full:
                    full += 1
                    await producer.wait_for_space()
        await producer.flush()  # raises DeliveryError if any record failed
        self.notes["buffer_full_retries"] = full
        return len(self.values)


class PykafSendNowaitCallbackRound(_PykafRound):
    """``send_nowait(..., on_delivery=)`` per record (a counting callback); flush."""

    async def produce(self, producer: Any) -> int:
        buffer_full = importlib.import_module("pykaf.errors").BufferFullError
        topic, send = self.topic, producer.send_nowait
        delivered = _DeliveryCounter()
        for value in self.values:
            while True:
                try:
                    send(topic, value, on_delivery=delivered)
                    break
                except buffer_full:
                    await producer.wait_for_space()
        await producer.flush()
        assert delivered.error is None, f"pykaf: {delivered.error}"
        return delivered.acked


class PykafSendBatchRound(_PykafRound):
    """``await send_batch()`` per 10,000 values, then flush and every ``wait()``."""

    async def produce(self, producer: Any) -> int:
        values, topic = self.values, self.topic
        deliveries = [
            await producer.send_batch(topic, values[i : i + CHUNK])
            for i in range(0, len(values), CHUNK)
        ]
        await producer.flush()
        delivered = 0
        for delivery in deliveries:
            delivered += await delivery.wait()
        return delivered


class _PykafSyncRound(Round):
    """pykaf.sync.Producer, the blocking facade."""

    def start(self) -> None:
        sync = importlib.import_module("pykaf.sync")
        self.producer = sync.Producer(self.bootstrap, **_pykaf_options())
        for partition in range(self.partitions):
            self.producer.send(
                self.topic, _warm_value(self.values), partition=partition, timeout=30
            )

    def stop(self) -> int:
        self.notes.update(_pykaf_stats(self.producer.statistics()))
        self.producer.close(timeout=ROUND_TIMEOUT_S)
        return self.acknowledged()

    def acknowledged(self) -> int:
        raise NotImplementedError


class PykafSyncRound(_PykafSyncRound):
    """``send_async()`` per record (a future each, checked after the round), flush."""

    def run(self) -> None:
        topic, send = self.topic, self.producer.send_async
        self.futures = [send(topic, value) for value in self.values]
        self.producer.flush(timeout=ROUND_TIMEOUT_S)

    def acknowledged(self) -> int:
        failed = [f.exception() for f in self.futures if not f.done() or f.exception()]
        assert not failed, f"pykaf.sync: {len(failed)} records failed, first {failed[0]!r}"
        return len(self.futures)


class PykafSyncManyRound(_PykafSyncRound):
    """``send_many()`` per 10,000 values (each call waits for its acknowledgements)."""

    def run(self) -> None:
        values, topic, send_many = self.values, self.topic, self.producer.send_many
        self.delivered = sum(
            send_many(topic, values[i : i + CHUNK], timeout=ROUND_TIMEOUT_S)
            for i in range(0, len(values), CHUNK)
        )

    def acknowledged(self) -> int:
        return self.delivered


class PykafSyncProduceRound(_PykafSyncRound):
    """``produce()`` and ``poll(0)`` per record, then ``flush()`` (confluent-kafka's idiom)."""

    def run(self) -> None:
        topic, produce, poll = self.topic, self.producer.produce, self.producer.poll
        for value in self.values:
            produce(topic, value)
            poll(0)
        # Raises DeliveryError if any record failed; returns what is left.
        self.left = self.producer.flush(timeout=ROUND_TIMEOUT_S)

    def acknowledged(self) -> int:
        assert self.left == 0, f"pykaf.sync: {self.left} records unacknowledged after flush"
        return len(self.values)


class PykafSyncProduceCallbackRound(PykafSyncProduceRound):
    """``produce(..., on_delivery=)`` and ``poll(0)`` per record, then ``flush()``."""

    def run(self) -> None:
        topic, produce, poll = self.topic, self.producer.produce, self.producer.poll
        self.delivered = delivered = _DeliveryCounter()
        for value in self.values:
            produce(topic, value, on_delivery=delivered)
            poll(0)
        self.left = self.producer.flush(timeout=ROUND_TIMEOUT_S)

    def acknowledged(self) -> int:
        super().acknowledged()
        assert self.delivered.error is None, f"pykaf.sync: {self.delivered.error}"
        return self.delivered.acked


def _round_factory(
    client: str, variant: str | None, broker: str
) -> tuple[Callable[[str, str, list[bytes]], Round], bool]:
    """A function making one round of the client, and whether it runs idempotent."""
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
        confluent = {"poll": ConfluentPollRound, "poll_cb": ConfluentPollCallbackRound}
        return confluent.get(variant or "", ConfluentRound), True
    if client == AIOKAFKA:
        pytest.importorskip("aiokafka")
        idempotence = broker != "tansu"  # Tansu refuses aiokafka's InitProducerId v0
        return partial(AiokafkaRound, idempotence=idempotence), idempotence
    if variant in ("sync", "sync_many", "sync_produce", "sync_produce_cb"):
        _load_pykaf_sync()
        rounds = {
            "sync": PykafSyncRound,
            "sync_many": PykafSyncManyRound,
            "sync_produce": PykafSyncProduceRound,
            "sync_produce_cb": PykafSyncProduceCallbackRound,
        }
        return rounds[variant], True
    _load_pykaf_producer()
    rounds_async: dict[str | None, Callable[[str, str, list[bytes]], Round]] = {
        "send_nowait": PykafSendNowaitRound,
        "send_nowait_cb": PykafSendNowaitCallbackRound,
    }
    return rounds_async.get(variant, PykafSendBatchRound), True


# -- the benchmark ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("broker_name", "client", "variant"),
    [
        pytest.param(b, c, v, id=f"{b}-{c}-{v}" if v else f"{b}-{c}")
        for b in BROKERS
        for c, v in CLIENTS
    ],
)
def test_produce(
    benchmark: Any,
    request: pytest.FixtureRequest,
    broker_name: str,
    client: str,
    variant: str | None,
) -> None:
    make_round, idempotence = _round_factory(client, variant, broker_name)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    records = SHORT_RECORDS.get((client, variant), RECORDS)
    values = bulk_values(RECORDS, VALUE_SIZE).values[:records]
    tag(
        benchmark,
        group=f"produce-1M-{broker_name}",
        client=client,
        records=records,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_S * 1000,
        idempotence=idempotence,
        compression="none",
    )

    current: list[Round] = []  # the round set up and not torn down yet
    acknowledged: list[int] = []
    growth_kb: list[int] = []
    start_rss: list[int | None] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"bench-{broker_name}-{client}-{variant or 'default'}-{next(_topic_ids)}"
        broker.create_topic(topic, PARTITIONS)
        one = make_round(broker.bootstrap, topic, values)
        current.append(one)
        one.start()
        start_rss.append(reset_peak_rss())
        return (one,), {}

    def teardown(one: Round) -> None:
        """Outside the timing: close the producer, check the topic, note the peak RSS."""
        current.remove(one)
        peak, base = status_kb("VmHWM"), start_rss[-1]
        if peak is not None and base is not None:
            # The kernel updates RSS counters lazily: a round that needs no
            # new memory can read a few pages below its start.
            growth_kb.append(max(peak - base, 0))
        acknowledged.append(one.stop())
        marks = broker.high_watermarks(one.topic)
        expected = records + PARTITIONS  # and the warm-up records
        assert sum(marks.values()) == expected, (
            f"{one.topic} holds {sum(marks.values())} records ({marks}); "
            f"{records} + {PARTITIONS} warm-up records were sent"
        )
        broker.delete_topic(one.topic)
        benchmark.extra_info.update(one.notes)  # the last round's

    cpu = CpuMeter()

    def one_round(one: Round) -> None:
        cpu.run(one.run)

    benchmark.pedantic(one_round, setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1)
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])

    assert acknowledged and all(n == records for n in acknowledged), (
        f"{client}: acknowledged {acknowledged} per round, expected {records}"
    )
    if growth_kb:
        benchmark.extra_info["peak_rss_growth_mb"] = round(max(growth_kb) / 1024, 1)
    note_rate(benchmark, records)
    cpu.note(benchmark, records)
