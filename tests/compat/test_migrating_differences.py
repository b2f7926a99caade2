"""Every difference docs/migrating.md lists between a drop-in and its library still holds.

The page's "Differences that remain" tables give each difference an id
(``ck-...`` for ``pykaf.compat.confluent_kafka``, ``kp-...`` for
``pykaf.compat.kafka``). :data:`CHECKS` has one check per id, which passes
while the difference is there: fixing one fails its check (drop the row and
the check together), and a row without a check, or a check without a row,
fails :func:`test_the_page_lists_the_differences_checked_here`.

Two rows are computed rather than written down: the defaults that differ
(librdkafka's read from librdkafka itself through ctypes, kafka-python's from
its ``DEFAULT_CONFIG``) and the public calls the drop-in lacks (from the
installed libraries' classes); their rows must name exactly what is computed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import inspect
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf.compat import confluent_kafka as ck
from pykaf.compat import kafka as kp
from pykaf.compat.confluent_kafka import _config as ck_config
from pykaf.compat.confluent_kafka import admin as ck_admin
from pykaf.compat.kafka import _config as kp_config
from pykaf.compat.kafka import admin as kp_admin
from pykaf.compat.kafka import errors as kp_errors

real_ck = pytest.importorskip("confluent_kafka")
real_ck_admin = pytest.importorskip("confluent_kafka.admin")
real_kp = pytest.importorskip("kafka")
bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

DOC = Path(__file__).parents[2] / "docs" / "migrating.md"
T = 30.0

# -- the page ----------------------------------------------------------------------------


def page_rows() -> dict[str, str]:
    """id -> the row's text, from every "Differences that remain" table of the page."""
    rows: dict[str, str] = {}
    for line in DOC.read_text().splitlines():
        found = re.match(r"^\| `((?:cka|ck|kp)-[a-z0-9-]+)` \|(.*)\|$", line)
        if found:
            assert found.group(1) not in rows, f"{found.group(1)} is listed twice"
            rows[found.group(1)] = found.group(2)
    return rows


def named_in_row(difference: str) -> set[str]:
    """The names a row gives in backticks."""
    return set(re.findall(r"`([^`]+)`", page_rows()[difference]))


# -- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture
def fake(fake_cluster: Any) -> Any:
    """A fresh fake cluster of three brokers (``bootstrap``, ``create_topic``, its controls)."""
    return fake_cluster


def _ck_conf(fake: Any, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": fake.bootstrap, **extra}


def _filled(fake: Any, partitions: int = 1, records: int = 4) -> str:
    topic = bc.unique("diff")
    fake.create_topic(topic, partitions)
    with pykaf.sync.Producer(fake.bootstrap, linger=0.001) as producer:
        for p in range(partitions):
            producer.send_many(topic, [b"%d" % i for i in range(records)], partition=p)
    return topic


def _ck_member(fake: Any, topic: str, **extra: Any) -> Any:
    conf = {"group.id": bc.unique("g"), "auto.offset.reset": "earliest", **extra}
    c = ck.Consumer(_ck_conf(fake, **conf))
    c.subscribe([topic])
    return c


def _ck_poll(c: Any, count: int) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + T
    while len(out) < count:
        assert time.monotonic() < deadline, f"only {len(out)} of {count} messages"
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append(msg)
    return out


def _ck_code(info: pytest.ExceptionInfo[Any]) -> int:
    return int(info.value.args[0].code())


def _kp_consumer(fake: Any, topic: str, **extra: Any) -> Any:
    options: dict[str, Any] = {"group_id": bc.unique("g"), "auto_offset_reset": "earliest"}
    return kp.KafkaConsumer(topic, bootstrap_servers=fake.bootstrap, **{**options, **extra})


def _kp_records(consumer: Any, count: int) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + T
    while len(out) < count:
        assert time.monotonic() < deadline
        for records in consumer.poll(timeout_ms=200).values():
            out.extend(records)
    return out


# -- defaults ------------------------------------------------------------------------------


def librdkafka_defaults() -> dict[str, str]:
    """librdkafka's default of every key the drop-in maps, from librdkafka itself."""
    from pykaf.testing._mock import find_librdkafka

    lib = ctypes.CDLL(find_librdkafka())
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_topic_conf_new.restype = ctypes.c_void_p
    getters = [
        (lib.rd_kafka_conf_get, lib.rd_kafka_conf_new()),
        (lib.rd_kafka_topic_conf_get, lib.rd_kafka_topic_conf_new()),
    ]
    for getter, _ in getters:
        getter.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t),
        ]
    out = {}
    for key in ck_config.OPTIONS:
        for getter, conf in getters:
            buf, size = ctypes.create_string_buffer(1024), ctypes.c_size_t(1024)
            if getter(conf, key.encode(), buf, ctypes.byref(size)) == 0:
                out[key] = buf.value.decode()
                break
    return out


class _Captured(Exception):
    """Raised by a stand-in for a pykaf client: the drop-in's options were captured."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__("captured")
        self.options = options


def _capture(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, make: Callable[[], Any]
) -> dict[str, Any]:
    """The options the drop-in passes to ``owner.name`` (a pykaf client class) in ``make``."""

    def stand_in(*args: Any, **options: Any) -> Any:
        raise _Captured(options)

    monkeypatch.setattr(owner, name, stand_in)
    with pytest.raises(_Captured) as info:
        make()
    return info.value.options


def _config(kind: type, options: dict[str, Any]) -> Any:
    fields = {f.name for f in dataclasses.fields(kind)}
    return kind(bootstrap_servers="h:1", **{k: v for k, v in options.items() if k in fields})


#: Values spelled differently by the other library that mean pykaf's default.
_SAME = {
    ("compression_level", -1, None),
    ("client_rack", "", None),
    # pykaf's empty security_protocol is PLAINTEXT unless TLS or SASL options are given
    ("security_protocol", "PLAINTEXT", ""),
}


def _effective(config: Any, options: dict[str, Any], target: str) -> Any:
    """An option's value in a pykaf config, or for a pykaf.sync.Producer option, there."""
    if hasattr(config, target):
        return getattr(config, target)
    if target in options:
        return options[target]
    return inspect.signature(pykaf.sync.Producer).parameters[target].default


def _differs(target: str, expected: Any, actual: Any) -> bool:
    if (target, expected, actual) in _SAME:
        return False
    if target == "partitioner":
        return type(expected) is not type(actual) or vars(expected).keys() != vars(actual).keys()
    return bool(expected != actual)


def ck_default_differences(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, Any]]:
    """librdkafka key -> (librdkafka's default, the drop-in's) where they differ."""
    producer = _capture(
        monkeypatch, pykaf.sync, "Producer", lambda: ck.Producer({"bootstrap.servers": "h:1"})
    )
    group = _capture(
        monkeypatch,
        pykaf.sync,
        "ConsumerGroup",
        lambda: ck.Consumer({"bootstrap.servers": "h:1", "group.id": "g"}).subscribe(["t"]),
    )
    configs = {
        "producer": _config(pykaf.ProducerConfig, producer),
        "consumer": _config(pykaf.GroupConfig, group),
    }
    out: dict[str, tuple[str, Any]] = {}
    for key, default in librdkafka_defaults().items():
        option = ck_config.OPTIONS[key]
        for role in sorted(option.roles):
            # librdkafka's producer asks the broker to create topics by default,
            # its consumer does not (one key, two defaults)
            text = "true" if (key, role) == ("allow.auto.create.topics", "producer") else default
            try:
                expected = option.convert(text)
            except ValueError:
                expected = text
            actual = _effective(
                configs[role], group if role == "consumer" else producer, option.target
            )
            if _differs(option.target, expected, actual):
                out[key] = (text, actual)
    return out


def kp_default_differences(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Any, Any]]:
    """kafka-python option -> (kafka-python's default, the drop-in's) where they differ."""
    from pykaf.compat.kafka import _shared, consumer, producer

    class _Admin:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(_shared, "SyncAdmin", _Admin)
    made = _capture(
        monkeypatch,
        producer,
        "SyncProducer",
        lambda: kp.KafkaProducer(bootstrap_servers="h:1"),
    )
    group = _capture(
        monkeypatch,
        consumer,
        "SyncGroup",
        lambda: kp.KafkaConsumer("t", bootstrap_servers="h:1", group_id="g"),
    )
    roles = [
        (real_kp.KafkaProducer.DEFAULT_CONFIG, (kp_config.CLIENT, kp_config.PRODUCER), made),
        (
            real_kp.KafkaConsumer.DEFAULT_CONFIG,
            (kp_config.CLIENT, kp_config.CONSUMER, kp_config.GROUP),
            group,
        ),
    ]
    out: dict[str, tuple[Any, Any]] = {}
    for defaults, tables, options in roles:
        kind = pykaf.ProducerConfig if options is made else pykaf.GroupConfig
        effective = _config(kind, options)
        for table in tables:
            for name, (target, convert) in table.items():
                if name not in defaults or defaults[name] is None:
                    continue
                expected = convert(name, defaults[name])
                if target == "compression":
                    expected = "none" if defaults[name] is None else expected
                actual = _effective(effective, options, target)
                if _differs(target, expected, actual):
                    out[name] = (defaults[name], actual)
    return out


def test_ck_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    differences = ck_default_differences(monkeypatch)
    assert differences, "every default is librdkafka's now: drop the row and this check"
    assert set(differences) == named_in_row("ck-defaults") & set(ck_config.OPTIONS), differences


def test_kp_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    differences = kp_default_differences(monkeypatch)
    assert differences, "every default is kafka-python's now: drop the row and this check"
    options = {
        n for table in (kp_config.CLIENT, kp_config.PRODUCER, kp_config.CONSUMER) for n in table
    }
    options |= set(kp_config.GROUP)
    assert set(differences) == named_in_row("kp-defaults") & options, differences


# -- calls the drop-ins lack -------------------------------------------------------------------


def _public(obj: Any) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def ck_missing() -> tuple[set[str], set[str]]:
    """What the drop-in lacks, and every name it could lack."""
    pairs = [
        (real_ck.Producer, ck.Producer, "Producer."),
        (real_ck.Consumer, ck.Consumer, "Consumer."),
        (real_ck_admin.AdminClient, ck_admin.AdminClient, "AdminClient."),
    ]
    missing = {prefix + n for real, ours, prefix in pairs for n in _public(real) - _public(ours)}
    classes = {n for n in _public(real_ck) if inspect.isclass(getattr(real_ck, n))}
    every = {prefix + n for real, _, prefix in pairs for n in _public(real)} | classes
    return missing | (classes - _public(ck)), every


def kp_missing() -> tuple[set[str], set[str]]:
    """What the drop-in lacks, and every name it could lack."""
    pairs = [
        (real_kp.KafkaProducer, kp.KafkaProducer, "KafkaProducer."),
        (real_kp.KafkaConsumer, kp.KafkaConsumer, "KafkaConsumer."),
        (real_kp.KafkaAdminClient, kp_admin.KafkaAdminClient, "KafkaAdminClient."),
    ]
    config = ("DEFAULT_CONFIG", "DEPRECATED_CONFIGS")  # the option tables, not calls
    every = {prefix + n for real, _, prefix in pairs for n in _public(real) if n not in config}
    missing = {
        prefix + n
        for real, ours, prefix in pairs
        for n in _public(real) - _public(ours)
        if n not in config
    }
    return missing, every


def test_ck_missing_calls() -> None:
    missing, every = ck_missing()
    assert missing
    assert missing == named_in_row("ck-missing-calls") & every, sorted(missing)


def test_kp_missing_calls() -> None:
    missing, every = kp_missing()
    assert missing
    assert missing == named_in_row("kp-missing-calls") & every, sorted(missing)


# -- confluent-kafka: behaviour ---------------------------------------------------------------


def test_ck_connect_at_construction() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": 1000}
    theirs = real_ck.Producer({**conf, "log_level": 0})  # never fails for that
    theirs.flush(0)
    with pytest.raises(ck.KafkaException) as info:
        ck.Producer({**conf, "request.timeout.ms": 1000})
    assert _ck_code(info) == ck.KafkaError._TRANSPORT


def test_ck_errors_raised(fake: Any) -> None:
    topic = _filled(fake)
    p = ck.Producer(_ck_conf(fake))
    try:
        p.produce(topic, b"x", partition=7)  # the topic has one partition; no callback
        with pytest.raises(ck.KafkaException):
            p.flush(T)  # confluent-kafka's flush returns 0 and drops the failure
    finally:
        p.close()
    # a fenced static member: poll raises FENCED_INSTANCE_ID (librdkafka logs it)
    conf = _ck_conf(fake, **{"group.id": bc.unique("g"), "group.instance.id": "one"})
    first, second = ck.Consumer(conf), ck.Consumer(conf)
    try:
        first.subscribe([topic])
        deadline = time.monotonic() + T
        while not first.assignment():
            assert time.monotonic() < deadline
            first.poll(0.2)
        second.subscribe([topic])
        with pytest.raises(ck.KafkaException) as info:
            while time.monotonic() < deadline:
                first.poll(0.2)
                second.poll(0)
        assert info.value.args[0].name() == "FENCED_INSTANCE_ID"
    finally:
        second.close()
        with contextlib.suppress(ck.KafkaException):
            first.close()


def test_ck_on_lost(fake: Any) -> None:
    c = ck.Consumer(_ck_conf(fake, **{"group.id": "g"}))
    with pytest.raises(ck.KafkaException) as info:
        c.subscribe(["t"], on_lost=lambda consumer, partitions: None)
    assert _ck_code(info) == ck.KafkaError._NOT_IMPLEMENTED


def test_ck_rebalance_callbacks_after_the_fact(fake: Any) -> None:
    """on_assign runs once the assignment is made: assigning offsets there is refused."""
    topic = _filled(fake)
    calls: list[Any] = []

    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        calls.append(partitions)
        consumer.assign([ck.TopicPartition(tp.topic, tp.partition, 2) for tp in partitions])

    c = ck.Consumer(_ck_conf(fake, **{"group.id": bc.unique("g")}))
    c.subscribe([topic], on_assign=on_assign)
    with pytest.raises(ck.KafkaException) as info:
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            c.poll(0.2)
    assert _ck_code(info) == ck.KafkaError._STATE and calls


def test_ck_regex_subscribe(fake: Any) -> None:
    c = ck.Consumer(_ck_conf(fake, **{"group.id": "g"}))
    with pytest.raises(ck.KafkaException) as info:
        c.subscribe(["^diff-.*"])
    assert _ck_code(info) == ck.KafkaError._NOT_IMPLEMENTED


def test_ck_group_positioning(fake: Any) -> None:
    topic = _filled(fake)
    c = _ck_member(fake, topic)
    try:
        _ck_poll(c, 1)
        tp = ck.TopicPartition(topic, 0, 0)
        for call in (lambda: c.seek(tp), lambda: c.pause([tp]), lambda: c.resume([tp])):
            with pytest.raises(ck.KafkaException) as info:
                call()
            assert _ck_code(info) == ck.KafkaError._NOT_IMPLEMENTED
    finally:
        c.close()


def test_ck_partition_eof(fake: Any) -> None:
    with pytest.raises(ck.KafkaException):
        ck.Consumer(_ck_conf(fake, **{"group.id": "g", "enable.partition.eof": True}))


def test_ck_cached_watermarks(fake: Any) -> None:
    c = ck.Consumer(_ck_conf(fake, **{"group.id": "g"}))
    with pytest.raises(ck.KafkaException) as info:
        c.get_watermark_offsets(ck.TopicPartition("t", 0), cached=True)
    assert _ck_code(info) == ck.KafkaError._NOT_IMPLEMENTED


def test_ck_stored_offsets_move_forward(fake: Any) -> None:
    topic = _filled(fake)
    c = _ck_member(fake, topic, **{"enable.auto.commit": False, "enable.auto.offset.store": False})
    try:
        _ck_poll(c, 4)
        c.store_offsets(offsets=[ck.TopicPartition(topic, 0, 3)])
        c.store_offsets(offsets=[ck.TopicPartition(topic, 0, 1)])  # librdkafka stores 1
        c.commit(asynchronous=False)
        [committed] = c.committed([ck.TopicPartition(topic, 0)])
        assert committed.offset == 3
    finally:
        c.close()


def test_ck_synchronous_commits(fake: Any) -> None:
    topic = _filled(fake)
    c = _ck_member(fake, topic, **{"enable.auto.commit": False})
    try:
        [msg] = _ck_poll(c, 1)
        assert c.commit(message=msg, asynchronous=True) is None
        [committed] = c.committed([ck.TopicPartition(topic, 0)])  # already there
        assert committed.offset == 1
    finally:
        c.close()
    with pytest.raises(ck.KafkaException):
        ck.Consumer(_ck_conf(fake, **{"group.id": "g", "on_commit": lambda e, p: None}))


def test_ck_auto_commit_from_poll(fake: Any) -> None:
    """Assigned partitions' auto commits are made by poll() and consume(), not a thread."""
    topic = _filled(fake)
    conf = {"group.id": bc.unique("g"), "auto.commit.interval.ms": 100}
    c = ck.Consumer(_ck_conf(fake, **conf))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        _ck_poll(c, 4)
        time.sleep(0.6)  # several intervals with no poll
        [committed] = c.committed([ck.TopicPartition(topic, 0)])
        assert committed.offset == ck.OFFSET_INVALID
        c.poll(0)
        [committed] = c.committed([ck.TopicPartition(topic, 0)])
        assert committed.offset == 4
    finally:
        c.close()


def test_ck_admin_refusals(fake: Any) -> None:
    with pytest.raises((ValueError, TypeError, ck.KafkaException)):
        ck_admin.NewPartitions("t", 3, replica_assignment=[[1], [1]])
    with pytest.raises(ValueError):
        ck_admin.ConfigResource(ck_admin.ResourceType.GROUP, "g")
    with pytest.raises((ValueError, TypeError, ck.KafkaException)):
        ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, "t", set_config={"a": "b"})


def test_ck_group_coordinator(fake: Any) -> None:
    topic = _filled(fake)
    c = _ck_member(fake, topic)
    admin = ck_admin.AdminClient(_ck_conf(fake))
    try:
        _ck_poll(c, 1)
        group = c.consumer_group_metadata().group_id
        [future] = admin.describe_consumer_groups([group]).values()
        assert future.result(T).coordinator is None
    finally:
        c.close()
        admin.close()


def test_ck_timeouts(fake: Any) -> None:
    c = ck.Consumer(_ck_conf(fake, **{"group.id": "g"}))
    assert c.list_topics(timeout=1e-6).topics is not None  # not _TIMED_OUT
    c.close()


def test_ck_purge_blocking(fake: Any) -> None:
    topic = _filled(fake)
    p = ck.Producer(_ck_conf(fake, **{"linger.ms": 10_000}))
    reports: list[Any] = []
    try:
        for _ in range(5):
            p.produce(topic, b"x", on_delivery=lambda err, msg: reports.append(err))
        p.purge(blocking=False)
        p.poll(0)  # the purge was done when the call returned: every report is ready
        assert [e.code() for e in reports] == [ck.KafkaError._PURGE_QUEUE] * 5
    finally:
        p.close()


def test_ck_refused_keys() -> None:
    for key in ck_config.REFUSED:
        with pytest.raises(ck.KafkaException) as info:
            ck.Producer({"bootstrap.servers": "h:1", key: "x"})
        assert key in info.value.args[0].str()
    assert set(ck_config.REFUSED) == named_in_row("ck-refused-keys") & set(ck_config.REFUSED)
    assert set(ck_config.REFUSED) <= named_in_row("ck-refused-keys")


# -- kafka-python: behaviour -------------------------------------------------------------------


def test_kp_unsupported_options() -> None:
    for name in kp_config.UNSUPPORTED:
        with pytest.raises(kp_errors.KafkaConfigurationError, match=name):
            kp.KafkaProducer(bootstrap_servers="h:1", **{name: object()})
    # consumer_timeout_ms is refused by the producer only: a consumer option
    listed = set(kp_config.UNSUPPORTED) - {"consumer_timeout_ms"}
    assert listed == named_in_row("kp-unsupported-options") & set(kp_config.UNSUPPORTED)


def test_kp_group_positioning(fake: Any) -> None:
    topic = _filled(fake)
    consumer = _kp_consumer(fake, topic)
    try:
        _kp_records(consumer, 1)
        tp = kp.TopicPartition(topic, 0)
        for call in (
            lambda: consumer.seek(tp, 0),
            lambda: consumer.seek_to_beginning(tp),
            lambda: consumer.seek_to_end(tp),
            lambda: consumer.pause(tp),
            lambda: consumer.resume(tp),
            lambda: consumer.commit({tp: kp.OffsetAndMetadata(1, None, -1)}),
        ):
            with pytest.raises(kp_errors.IllegalStateError):
                call()
    finally:
        consumer.close()


def test_kp_listener(fake: Any) -> None:
    consumer = kp.KafkaConsumer(bootstrap_servers=fake.bootstrap, group_id="g")
    try:
        with pytest.raises((kp_errors.KafkaConfigurationError, kp_errors.IllegalStateError)):
            consumer.subscribe(["t"], listener=object())
    finally:
        consumer.close()


def test_kp_pattern_snapshot(fake: Any) -> None:
    first = _filled(fake)
    prefix = first.rsplit("-", 1)[0]
    consumer = kp.KafkaConsumer(
        bootstrap_servers=fake.bootstrap, group_id=bc.unique("g"), auto_offset_reset="earliest"
    )
    try:
        consumer.subscribe(pattern=f"^{prefix}-.*")
        _kp_records(consumer, 4)
        later = _filled(fake)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert not any(tp.topic == later for tp in consumer.poll(timeout_ms=200))
        assert consumer.subscription() == {first}
    finally:
        consumer.close()


def test_kp_auto_commit_arguments(fake: Any) -> None:
    topic = _filled(fake)
    consumer = _kp_consumer(fake, topic)
    try:
        with pytest.raises(kp_errors.KafkaConfigurationError):
            consumer.poll(timeout_ms=10, update_offsets=False)
        with pytest.raises(kp_errors.KafkaConfigurationError):
            consumer.close(autocommit=False)
    finally:
        consumer.close()


def test_kp_admin_arguments(fake: Any) -> None:
    admin = kp_admin.KafkaAdminClient(bootstrap_servers=fake.bootstrap)
    try:
        with pytest.raises(kp_errors.KafkaConfigurationError):
            admin.list_consumer_groups(broker_ids=[1])
        with pytest.raises(kp_errors.KafkaConfigurationError):
            admin.describe_consumer_groups(["g"], group_coordinator_id=1)
        with pytest.raises(kp_errors.KafkaConfigurationError):
            admin.describe_consumer_groups(["g"], include_authorized_operations=True)
    finally:
        admin.close()


def test_kp_admin_shapes(fake: Any) -> None:
    topic, group_id = _filled(fake), bc.unique("g")
    consumer = _kp_consumer(fake, topic, group_id=group_id)
    admin = kp_admin.KafkaAdminClient(bootstrap_servers=fake.bootstrap)
    try:
        made = admin.create_topics([kp_admin.NewTopic(bc.unique("shape"), 1, 1)])
        assert set(made) == {"topics"} and set(made["topics"][0]) == {
            "name",
            "error_code",
            "error_message",
        }
        _kp_records(consumer, 1)
        [group] = admin.describe_consumer_groups([group_id])
        member = group.members[0]
        assert member.member_metadata is None and isinstance(member.member_assignment, dict)
    finally:
        consumer.close()
        admin.close()


def test_kp_record_fields(fake: Any) -> None:
    topic = _filled(fake)
    producer = kp.KafkaProducer(bootstrap_servers=fake.bootstrap)
    consumer = _kp_consumer(fake, topic)
    try:
        assert producer.send(topic, b"x").get(T).checksum is None
        [record] = _kp_records(consumer, 1)[:1]
        assert (record.leader_epoch, record.checksum) == (-1, None)
    finally:
        producer.close(T)
        consumer.close()


def test_kp_callback_thread(fake: Any) -> None:
    topic = _filled(fake)
    producer = kp.KafkaProducer(bootstrap_servers=fake.bootstrap)
    threads: list[threading.Thread] = []
    try:
        future = producer.send(topic, b"x")
        future.add_callback(lambda metadata: threads.append(threading.current_thread()))
        future.get(T)
        assert threads == [threading.current_thread()]
    finally:
        producer.close(T)


def test_kp_close_timeout(fake: Any) -> None:
    topic = _filled(fake)
    producer = kp.KafkaProducer(bootstrap_servers=fake.bootstrap)
    assert producer.send(topic, b"x").get(T).offset == 4
    for node in (1, 2, 3):
        fake.broker_down(node)
    try:
        producer.send(topic, b"y")
        with pytest.raises(kp_errors.KafkaTimeoutError):
            producer.close(timeout=0.3)  # kafka-python closes and logs
    finally:
        for node in (1, 2, 3):
            fake.broker_up(node)


def test_kp_metrics(fake: Any) -> None:
    producer = kp.KafkaProducer(bootstrap_servers=fake.bootstrap)
    try:
        names = set(producer.metrics()["producer-metrics"])
        assert "record-send-rate" not in names and names <= named_in_row("kp-metrics")
    finally:
        producer.close(T)


# -- confluent_kafka.aio ----------------------------------------------------------------


def _aio(main: Callable[[], Any]) -> None:
    import asyncio

    asyncio.run(main())


def test_cka_poll(fake: Any) -> None:
    from pykaf.compat.confluent_kafka.aio import AIOProducer

    topic = _filled(fake, records=0)

    async def main() -> None:
        async with AIOProducer(_ck_conf(fake)) as producer:
            delivered = await producer.produce(topic, value=b"x")
            await delivered
            assert await producer.poll(0) == 0  # nothing was left for it to serve

    _aio(main)


def test_cka_unused_arguments(fake: Any) -> None:
    from pykaf.compat.confluent_kafka.aio import AIOProducer

    topic = _filled(fake, records=0)
    params = inspect.signature(AIOProducer).parameters
    assert {"batch_size", "buffer_timeout", "max_workers", "executor"} <= set(params)

    async def main() -> None:
        before = threading.active_count()
        async with AIOProducer(_ck_conf(fake), batch_size=1, buffer_timeout=0.001) as producer:
            futures = [await producer.produce(topic, value=b"%d" % i) for i in range(100)]
            assert len(producer) == 100  # nothing flushed per batch_size record
            for future in futures:
                await future
            assert threading.active_count() <= before + 1  # no pool (trio's one helper)

    _aio(main)


def test_cka_headers(fake: Any) -> None:
    from confluent_kafka.aio import AIOProducer as RealAIOProducer

    from pykaf.compat.confluent_kafka.aio import AIOProducer

    topic = _filled(fake, records=0)
    seen: list[Any] = []

    async def main() -> None:
        real = RealAIOProducer(_ck_conf(fake))
        with pytest.raises(NotImplementedError):
            await real.produce(topic, value=b"x", headers=[("h", b"1")])
        await real.close()
        async with AIOProducer(_ck_conf(fake)) as producer:
            delivered = await producer.produce(
                topic,
                value=b"x",
                headers=[("h", b"1")],
                on_delivery=lambda err, msg: seen.append(err),
            )
            await delivered
        assert seen == [None]

    _aio(main)


def test_cka_sasl_credentials(fake: Any) -> None:
    from pykaf.compat.confluent_kafka.aio import AIOConsumer, AIOProducer

    async def main() -> None:
        producer = AIOProducer(_ck_conf(fake))
        consumer = AIOConsumer(_ck_conf(fake, **{"group.id": bc.unique("g")}))
        for client in (producer, consumer):
            with pytest.raises(ck.KafkaException) as info:
                await client.set_sasl_credentials("u", "p")
            assert _ck_code(info) == ck_error_code("_NOT_IMPLEMENTED")
        await producer.close()
        await consumer.close()

    _aio(main)


def test_cka_consumer(fake: Any) -> None:
    from pykaf.compat.confluent_kafka.aio import AIOConsumer

    async def main() -> None:
        consumer = AIOConsumer(_ck_conf(fake, **{"group.id": bc.unique("g")}))
        assert isinstance(consumer._consumer, ck.Consumer)
        with pytest.raises(ck.KafkaException) as info:  # ck-on-lost, through the thread
            await consumer.subscribe(["t"], on_lost=lambda c, ps: None)
        assert _ck_code(info) == ck_error_code("_NOT_IMPLEMENTED")
        await consumer.close()

    _aio(main)


def ck_error_code(name: str) -> int:
    from pykaf.compat.confluent_kafka._error import LOCAL_CODES

    return LOCAL_CODES[name]


CHECKS: dict[str, Callable[..., None]] = {
    "ck-defaults": test_ck_defaults,
    "ck-missing-calls": test_ck_missing_calls,
    "ck-connect-at-construction": test_ck_connect_at_construction,
    "ck-errors-raised": test_ck_errors_raised,
    "ck-on-lost": test_ck_on_lost,
    "ck-rebalance-callbacks": test_ck_rebalance_callbacks_after_the_fact,
    "ck-regex-subscribe": test_ck_regex_subscribe,
    "ck-group-positioning": test_ck_group_positioning,
    "ck-partition-eof": test_ck_partition_eof,
    "ck-cached-watermarks": test_ck_cached_watermarks,
    "ck-stored-offsets": test_ck_stored_offsets_move_forward,
    "ck-synchronous-commits": test_ck_synchronous_commits,
    "ck-auto-commit-from-poll": test_ck_auto_commit_from_poll,
    "ck-admin-refusals": test_ck_admin_refusals,
    "ck-group-coordinator": test_ck_group_coordinator,
    "ck-timeouts": test_ck_timeouts,
    "ck-purge-blocking": test_ck_purge_blocking,
    "ck-refused-keys": test_ck_refused_keys,
    "kp-defaults": test_kp_defaults,
    "kp-missing-calls": test_kp_missing_calls,
    "kp-unsupported-options": test_kp_unsupported_options,
    "kp-group-positioning": test_kp_group_positioning,
    "kp-listener": test_kp_listener,
    "kp-pattern-snapshot": test_kp_pattern_snapshot,
    "kp-auto-commit-arguments": test_kp_auto_commit_arguments,
    "kp-admin-arguments": test_kp_admin_arguments,
    "kp-admin-shapes": test_kp_admin_shapes,
    "kp-record-fields": test_kp_record_fields,
    "kp-callback-thread": test_kp_callback_thread,
    "kp-close-timeout": test_kp_close_timeout,
    "kp-metrics": test_kp_metrics,
    "cka-poll": test_cka_poll,
    "cka-unused-arguments": test_cka_unused_arguments,
    "cka-headers": test_cka_headers,
    "cka-sasl-credentials": test_cka_sasl_credentials,
    "cka-consumer": test_cka_consumer,
}


def test_the_page_lists_the_differences_checked_here() -> None:
    rows = page_rows()
    assert set(rows) == set(CHECKS), (
        f"on the page without a check: {sorted(set(rows) - set(CHECKS))}; "
        f"checked but not on the page: {sorted(set(CHECKS) - set(rows))}"
    )
