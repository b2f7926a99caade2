"""The conformance suite's machinery: targets, raw requests, normalised answers, cases.

A *case* is an async function that sends raw ``pykaf.protocol`` requests to a
:class:`Target` (the fake cluster or Apache Kafka, one node each) through a
:class:`Wire` and records the answers that matter with ``out.add(label,
answer)``. :func:`norm` turns a response into plain data with what legitimately
differs between two brokers (ids, timestamps, throttle times, node ids, ports,
error messages) masked, so two targets' answers compare with ``==``.

A case whose answers differ on purpose names the labels in ``differs`` with
each target's answer and the reason (listed in docs/testing.md, "Checked
against Apache Kafka"); the comparison then checks that each target still
answers exactly that, so it notices when the difference changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from pykaf import codec
from pykaf.testing import FakeClusterThread
from pykaf.testing._fake.handlers import all_apis
from pykaf.testing._kafka import AsyncKafkaCluster, KafkaCluster

#: fields whose values are ids, times or addresses: compared only as "set" or not
MASKED = frozenset(
    {
        "throttle_time_ms",
        "error_message",
        "host",
        "port",
        "node_id",
        "broker_id",
        "leader_id",
        "controller_id",
        "coordinator_id",  # unused name guard
        "cluster_id",
        "topic_id",
        "producer_id",
        "member_id",
        "group_instance_id",
        "log_append_time_ms",
        "session_id",
        "leader",
        "client_id",
        "client_host",
        "member_metadata",
        "member_assignment",
        "current_leader",
        "node_endpoints",
        "leader_epoch",
        "batch_index_error_message",
    }
)

#: ids that may legitimately be 0 on one broker and not on the other: "<set>" unless -1
IDS = frozenset({"producer_id", "node_id", "broker_id", "leader_id", "controller_id"})

#: each API's version in the suite: the fake cluster's newest, which Kafka 4.3 speaks too
VERSIONS: dict[int, int] = {
    api.request.API_KEY: min(api.max_version, api.request.MAX_VERSION) for api in all_apis()
}

MASK = "<set>"


def _mask(value: Any) -> Any:
    if value in (None, -1, 0, "", b"") or value == []:
        return value
    return MASK


def records(data: Any) -> list[Any]:
    """A record set as data: per batch its offsets, flags and records (no timestamps)."""
    out = []
    for b in codec.decode_batches(bytes(data or b"")):
        out.append(
            {
                "base_offset": b.base_offset,
                "last_offset_delta": b.last_offset_delta,
                "control": bool(b.is_control),
                "transactional": bool(b.is_transactional),
                "records": [(r.offset, r.key, r.value) for r in b.records],
            }
        )
    return out


def norm(
    msg: Any, *, mask: frozenset[str] = frozenset(), drop: frozenset[str] = frozenset()
) -> Any:
    """``msg`` (a protocol message, or a list of them) as plain data, ids and times masked.

    Fields in :data:`MASKED` or ``mask`` become ``"<set>"`` when they hold a
    value (their empty or -1 values stay, so "set" versus "not set" still
    counts); fields in ``drop`` are left out; record sets are decoded.
    """
    masked = MASKED | mask
    if isinstance(msg, list):
        return [norm(m, mask=mask, drop=drop) for m in msg]
    attrs = getattr(type(msg), "_attrs", None)
    if attrs is None:
        return msg
    out: dict[str, Any] = {}
    for attr in attrs:
        if attr in drop or attr == "unknown_tags":
            continue
        value = getattr(msg, attr)
        if attr == "records":
            out[attr] = records(value)
        elif attr in IDS:
            out[attr] = value if value in (-1, None) else MASK
        elif attr in masked:
            out[attr] = _mask(value) if not hasattr(type(value), "_attrs") else MASK
        elif isinstance(value, list) or hasattr(type(value), "_attrs"):
            out[attr] = norm(value, mask=mask, drop=drop)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            out[attr] = bytes(value)
        else:
            out[attr] = value
    return out


@dataclass
class Wire:
    """Raw requests to a one-node target, at the suite's versions (:data:`VERSIONS`)."""

    client: Any
    node_id: int

    async def send(self, request: Any, version: int | None = None) -> Any:
        """Send ``request`` to the node and return the response body."""
        v = VERSIONS[type(request).API_KEY] if version is None else version
        return await self.client.request(self.node_id, request, v)

    async def send_no_answer(self, request: Any, version: int | None = None) -> None:
        """Send a request that gets no answer (Produce with acks=0)."""
        conn = await self.client.broker_connection(self.node_id)
        v = VERSIONS[type(request).API_KEY] if version is None else version
        await conn.request(request, v, expect_response=False)


class Target:
    """One broker the cases run on: ``name`` is "fake" or "kafka"."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        create: Callable[[str, int, dict[str, str] | None], Awaitable[None]],
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self._create = create

    async def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> str:
        """Create a topic (ready to serve when this returns); return its name."""
        await self._create(name, partitions, configs)
        return name

    async def wait_for(
        self, probe: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], timeout: float = 30
    ) -> Any:
        """Call ``probe`` until ``done(answer)`` (Kafka completes some things after answering)."""
        answer: Any = None
        with trio.move_on_after(timeout):
            while True:
                answer = await probe()
                if done(answer):
                    return answer
                await trio.sleep(0.05)
        raise AssertionError(f"{self.name}: still {answer!r} after {timeout} s")


@dataclass
class Answers:
    """A case's recorded answers, by label, in the order recorded."""

    values: dict[str, Any] = field(default_factory=dict)

    def add(self, label: str, answer: Any) -> Any:
        """Record ``answer`` under ``label`` (each label once); return it."""
        assert label not in self.values, f"label {label!r} recorded twice"
        self.values[label] = answer
        return answer


@dataclass(frozen=True)
class Differs:
    """An expected difference: each target's answer for one label, and why."""

    fake: Any
    kafka: Any
    why: str


CaseFn = Callable[[Target, Wire, Answers], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    """A behaviour, written once, run on every target."""

    name: str
    fn: CaseFn
    differs: dict[str, Differs]


CASES: dict[str, Case] = {}
_counter = itertools.count()


def case(differs: dict[str, Differs] | None = None) -> Callable[[CaseFn], CaseFn]:
    """Register a case under its function's name (without a ``case_`` prefix)."""

    def register(fn: CaseFn) -> CaseFn:
        name = fn.__name__.removeprefix("case_")
        assert name not in CASES, f"two cases named {name}"
        CASES[name] = Case(name, fn, dict(differs or {}))
        return fn

    return register


def codes(resp: Any, topics: str = "responses", parts: str = "partitions") -> list[Any]:
    """The (topic, partition, error code) triples of a per-partition response."""
    out = []
    for t in getattr(resp, topics):
        for p in getattr(t, parts):
            index = getattr(p, "partition_index", getattr(p, "index", None))
            out.append((getattr(t, "name", getattr(t, "topic", None)), index, p.error_code))
    return out


def fake_target(fake: FakeClusterThread) -> Target:
    """The fake cluster as a :class:`Target`."""

    async def create(name: str, partitions: int, configs: dict[str, str] | None) -> None:
        await trio.to_thread.run_sync(lambda: fake.create_topic(name, partitions, 1, configs))

    return Target("fake", fake.bootstrap, create)


def kafka_target(kafka: KafkaCluster) -> Target:
    """Apache Kafka as a :class:`Target`."""
    akafka = AsyncKafkaCluster(kafka)

    async def create(name: str, partitions: int, configs: dict[str, str] | None) -> None:
        await akafka.create_topic(name, partitions, 1, configs)

    return Target("kafka", kafka.bootstrap, create)
