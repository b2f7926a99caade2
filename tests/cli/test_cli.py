"""The ``pykaf`` command, run as a user runs it (``python -m pykaf``), against real brokers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

import pykaf
import pykaf.sync

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

Run = Callable[..., subprocess.CompletedProcess[str]]


def pykaf_command(
    *args: str, bootstrap: str | None = None, stdin: str = "", check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pykaf ARGS`` as a user would (the brokers from ``bootstrap``)."""
    env = dict(os.environ)
    if bootstrap is not None:
        env["PYKAF_BOOTSTRAP_SERVERS"] = bootstrap
    done = subprocess.run(
        [sys.executable, "-m", "pykaf", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"pykaf {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done


@pytest.fixture(params=["kafka", "fake"])
def cli(request: pytest.FixtureRequest) -> tuple[Any, Run]:
    """A broker, and a function running ``python -m pykaf ARGS`` against it.

    Apache Kafka, and the fake cluster users' own tests run the command on.
    """
    broker = bc.broker_from(request, request.param)
    return broker, partial(pykaf_command, bootstrap=broker.bootstrap)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topics_commands(cli: tuple[Any, Run]) -> None:
    _, run = cli
    topic = unique("cli-topic")
    assert run("topics", "create", topic, "-p", "3").stdout.strip() == f"created {topic}"
    assert topic in run("topics", "list").stdout.split()
    assert topic in json.loads(run("topics", "list", "--json").stdout)
    described = json.loads(run("topics", "describe", topic, "--json").stdout)
    assert [p["partition"] for p in described[topic]["partitions"]] == [0, 1, 2]
    table = run("topics", "describe", topic).stdout.splitlines()
    assert table[0].split() == ["topic", "partition", "leader", "replicas", "isr"]
    assert len(table) == 4
    again = run("topics", "create", topic, "-p", "3", check=False)
    assert again.returncode == 1 and "TopicExistsError" in again.stderr
    run("topics", "delete", topic)
    assert topic not in run("topics", "list").stdout.split()


def test_produce_then_consume(cli: tuple[Any, Run]) -> None:
    _, run = cli
    topic = unique("cli-data")
    run("topics", "create", topic, "-p", "2")
    lines = "".join(f"k{i}:value {i}\n" for i in range(20))
    produced = run("produce", topic, "-K", ":", "-H", "source=cli", "-p", "1", stdin=lines)
    assert "produced 20 records" in produced.stderr
    run("produce", topic, "-p", "0", stdin="plain one\nplain two\n")

    docs = [
        json.loads(line)
        for line in run(
            "consume", topic, "--from", "beginning", "-n", "22", "--format", "json"
        ).stdout.splitlines()
    ]
    by_partition = {p: [d for d in docs if d["partition"] == p] for p in (0, 1)}
    assert [d["value"] for d in by_partition[0]] == ["plain one", "plain two"]
    assert [d["key"] for d in by_partition[0]] == [None, None]
    assert [(d["key"], d["value"]) for d in by_partition[1]] == [
        (f"k{i}", f"value {i}") for i in range(20)
    ]
    assert all(d["headers"] == [["source", "cli"]] for d in by_partition[1])
    assert [d["offset"] for d in by_partition[1]] == list(range(20))

    # consumer options through -X (the side calls to the admin client leave them out)
    values = run(
        "consume", topic, "-p", "1", "--from", "15", "-n", "5", "-X", "fetch_max_wait=0.05"
    ).stdout.splitlines()
    assert values == [f"value {i}" for i in range(15, 20)]
    # nothing new after the end: --timeout ends it
    idle = run("consume", topic, "-t", "1")
    assert idle.stdout == "" and "consumed 0 records" in idle.stderr


def test_groups_commands(cli: tuple[Any, Run]) -> None:
    _, run = cli
    topic, group = unique("cli-grp"), unique("cli-g")
    run("topics", "create", topic, "-p", "1")
    run("produce", topic, stdin="".join(f"{i}\n" for i in range(5)))
    # Quick group timings (a lone member's first join waits out the rebalance on Tansu)
    fast = ("-X", "rebalance_timeout=4", "-X", "session_timeout=6", "-X", "heartbeat_interval=0.2")
    got = run("consume", topic, "-g", group, "--from", "beginning", "-n", "5", *fast)
    assert got.stdout.splitlines() == [str(i) for i in range(5)]
    assert group in run("groups", "list").stdout
    lag = json.loads(run("groups", "lag", group, "--json").stdout)
    assert [(x["partition"], x["committed"], x["end"], x["lag"]) for x in lag] == [(0, 5, 5, 0)]
    run("groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert "total lag 5" in run("groups", "lag", group).stdout
    run("groups", "reset-offsets", group, "--topic", topic, "--to-offset", "3")
    again = run("consume", topic, "-g", group, "-n", "2", *fast)
    assert again.stdout.splitlines() == ["3", "4"]
    described = json.loads(run("groups", "describe", group, "--json").stdout)
    assert described["group_id"] == group and described["members"] == []
    run("groups", "delete", group)
    assert group not in run("groups", "list").stdout


def test_consume_to_the_end_errors_and_ctrl_c(cli: tuple[Any, Run]) -> None:
    broker, run = cli
    topic = unique("cli-end")
    run("topics", "create", topic, "-p", "2")
    run("produce", topic, "-p", "0", stdin="".join(f"{i}\n" for i in range(7)))
    run("produce", topic, "-p", "1", stdin="one\n")
    # -e: every partition read to its end, then exit 0 (no -t, no -n)
    done = run("consume", topic, "--from", "beginning", "-e")
    assert sorted(done.stdout.splitlines()) == sorted([str(i) for i in range(7)] + ["one"])
    assert "consumed 8 records" in done.stderr
    single = run("consume", topic, "-p", "1", "--from", "beginning", "-e")
    assert single.stdout == "one\n" and "consumed 1 record\n" in single.stderr
    # an error inside trio's nurseries: one line, no exception group's traceback
    missing = run("consume", topic, "-p", "7", check=False)
    assert missing.returncode == 1, missing.stderr
    assert "ExceptionGroup" not in missing.stderr and "Traceback" not in missing.stderr
    assert missing.stderr.count("\n") == 1 and "pykaf: " in missing.stderr
    # Ctrl-C: the count so far, and 130 (as the docs say)
    env = {**os.environ, "PYKAF_BOOTSTRAP_SERVERS": broker.bootstrap}
    # `python -m pykaf` that takes Ctrl-C even when pytest runs in the background
    # of a shell without job control (which starts it with SIGINT ignored).
    main = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler);"
        " runpy.run_module('pykaf', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", main, "consume", topic, "--from", "beginning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline()  # consuming: the first record is out
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "consumed" in err and "Traceback" not in err


def test_group_lag_without_a_commit_and_reset_offsets_output(cli: tuple[Any, Run]) -> None:
    broker, run = cli
    topic, group = unique("cli-lag"), unique("cli-g")
    run("topics", "create", topic, "-p", "2")
    run("produce", topic, "-p", "0", stdin="a\nb\n")
    with pykaf.sync.Admin(broker.bootstrap) as admin:
        admin.alter_group_offsets(group, {(topic, 0): 1})  # partition 1: no commit
    rows = [line.split() for line in run("groups", "lag", group).stdout.splitlines()]
    assert rows[0] == ["topic", "partition", "committed", "end", "lag"]
    assert rows[1] == [topic, "0", "1", "2", "1"]
    assert rows[2][:3] == [topic, "1", "-"]
    reset = run("groups", "reset-offsets", group, "--topic", topic, "--to-offset", "0").stdout
    lines = reset.splitlines()
    assert lines[0] == f"group {group}: offsets of {topic} set"
    assert [line.split() for line in lines[1:]] == [["partition", "offset"], ["0", "0"], ["1", "0"]]


def test_produce_to_a_new_topic_lets_the_broker_create_it(cli: tuple[Any, Run]) -> None:
    """As with kcat and Kafka's console producer, the broker's auto.create.topics.enable decides."""
    _, run = cli
    topic = unique("cli-new")
    assert "produced 5 records" in run("produce", topic, stdin="1\n2\n3\n4\n5\n").stderr
    assert run("consume", topic, "--from", "beginning", "-n", "5").stdout.split() == list("12345")
    refused = run(
        "produce",
        unique("cli-new"),
        "-X",
        "allow_auto_create_topics=false",
        stdin="x\n",
        check=False,
    )
    assert refused.returncode == 1
    assert "UnknownTopicOrPartitionError" in refused.stderr
    assert "allow_auto_create_topics=False" in refused.stderr


@pytest.fixture(params=["kafka", "fake"])
def kafka_or_fake(request: pytest.FixtureRequest) -> Any:
    """Apache Kafka, then a fresh fake cluster: for what Tansu lacks."""
    return bc.broker_from(request, request.param)


def test_consume_from_a_time(kafka_or_fake: Any) -> None:
    """Kafka and the fake look offsets up by time (Tansu answers 0 to any time)."""
    topic = unique("cli-time")
    kafka_or_fake.create(topic, 1)
    run = partial(pykaf_command, bootstrap=kafka_or_fake.bootstrap)
    run("produce", topic, stdin="early\n")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    run("produce", topic, stdin="late\n")
    assert run("consume", topic, "--from-time", str(middle), "-n", "1").stdout == "late\n"
    future = "2999-01-01T00:00:00"
    assert run("consume", topic, "--from-time", future, "-t", "0.5").stdout == ""


def test_consume_fetches_a_quarter_mebibyte_per_partition_unless_told(
    fake_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory: printing record by record, larger fetches only wait in RAM (210 MB -> 88 MB)."""
    from pykaf.cli import main
    from pykaf.cli._console import CONSUME_PARTITION_FETCH_BYTES

    fake_cluster.create_topic("fetch-size", 1)
    made: list[dict[str, Any]] = []

    class Recording(pykaf.sync.Consumer):
        def __init__(self, bootstrap: Any, **options: Any) -> None:
            made.append(options)
            super().__init__(bootstrap, **options)

    monkeypatch.setattr(pykaf.sync, "Consumer", Recording)
    args = ["consume", "fetch-size", "-b", fake_cluster.bootstrap, "-t", "0.1"]
    assert main(args) == 0
    assert main([*args, "-X", "max_partition_fetch_bytes=4096"]) == 0
    assert [m["max_partition_fetch_bytes"] for m in made] == [CONSUME_PARTITION_FETCH_BYTES, 4096]


def test_usage_errors_exit_2() -> None:
    run = partial(pykaf_command, check=False)
    for args, message in [
        (("consume",), "topic"),
        (("consume", "t", "--from", "soon"), "--from must be beginning, end or an offset"),
        (("topics", "create", "t", "-c", "novalue"), "--config must look like NAME=VALUE"),
        (("consume", "t", "-X", "oops"), "-X must look like NAME=VALUE"),
    ]:
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    unreachable = run("topics", "list", "-b", "127.0.0.1:1", "-X", "connect_timeout=1")
    assert unreachable.returncode == 1 and "pykaf: " in unreachable.stderr
    assert "Connection refused" in unreachable.stderr
    typed = run("topics", "list", "-X", "request_timeout=abc")
    assert typed.returncode == 1 and "must be a number, not str" in typed.stderr


def test_help_version_and_options_before_the_command() -> None:
    run = partial(pykaf_command, check=False)
    bare = run()  # no command: a usage error, with what it can do
    assert bare.returncode == 2 and bare.stdout == "", bare
    assert "COMMAND" in bare.stderr and "consume" in bare.stderr
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"pykaf {pykaf.__version__}"
    demo = run("demo", "-h")
    assert demo.returncode == 0 and demo.stdout.startswith("usage: pykaf demo")
    # -b and -X before the command (kcat's order), and after it: the command's -b wins
    early = run("-b", "127.0.0.1:1", "-X", "connect_timeout=1", "topics", "list")
    assert early.returncode == 1 and "127.0.0.1:1" in early.stderr
    both = run(
        "-b", "127.0.0.1:1", "topics", "list", "-b", "127.0.0.1:2", "-X", "connect_timeout=1"
    )
    assert (
        both.returncode == 1 and "127.0.0.1:2" in both.stderr and "127.0.0.1:1" not in both.stderr
    )


def test_a_usage_error_shows_the_usage_of_the_command_it_is_in() -> None:
    run = partial(pykaf_command, check=False)
    for args, usage, message in [
        (("topics", "create", "t", "--bogus"), "pykaf topics create", "unrecognized arguments"),
        (("consume", "t", "--frm", "x"), "pykaf consume", "unrecognized arguments: --frm x"),
        (("groups", "lag"), "pykaf groups lag", "required: group"),
        (("topics",), "pykaf topics", "required: ACTION"),
        # found after parsing
        (("consume", "t", "-X", "oops"), "pykaf consume", "-X must look like NAME=VALUE"),
        (("topics", "create", "t", "-c", "x"), "pykaf topics create", "--config must look"),
        # before the command: the top-level usage
        (("--bogus", "topics", "list"), "pykaf [-h]", "unrecognized arguments: --bogus"),
    ]:
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(f"usage: {usage} "), (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)


def test_groups_that_do_not_exist_are_not_found(cli: tuple[Any, Run]) -> None:
    broker, run = cli
    group = unique("cli-nosuch")
    for action in ("lag", "describe"):
        for extra in ((), ("--json",)):
            done = run("groups", action, group, *extra, check=False)
            assert done.returncode == 1, (action, done)
            assert done.stdout == ""
            assert done.stderr == f"pykaf: GroupIdNotFoundError: group {group!r} not found\n"
    # a group with committed offsets and nothing else is there: no stray space either
    topic, kept = unique("cli-kept"), unique("cli-g")
    run("topics", "create", topic, "-p", "1")
    with pykaf.sync.Admin(broker.bootstrap) as admin:
        admin.alter_group_offsets(kept, {(topic, 0): 0})
    assert run("groups", "describe", kept).stdout.splitlines()[0] == f"group {kept}: Empty"
    assert run("groups", "lag", kept).stdout.splitlines()[-1] == "total lag 0"


def test_produce_a_line_without_the_key_separator(cli: tuple[Any, Run], tmp_path: Any) -> None:
    _, run = cli
    topic = unique("cli-bad")
    run("topics", "create", topic, "-p", "1")
    lines = "k0:v0\nno separator\nk2:v2\n"
    stopped = run("produce", topic, "-K", ":", stdin=lines, check=False)
    # a data error: exit 1, the line named, no usage; the lines before it are sent
    assert stopped.returncode == 1, stopped.stderr
    assert "usage:" not in stopped.stderr
    summary, error = stopped.stderr.splitlines()
    assert summary.startswith(f"produced 1 record to {topic} in ")
    assert error == (
        "pykaf: stdin line 2 has no key separator ':': b'no separator' "
        "(--skip-bad-lines leaves such lines out)"
    )
    skipped = run("produce", topic, "-K", ":", "--skip-bad-lines", stdin=lines)
    warning, summary = skipped.stderr.splitlines()
    assert warning == "pykaf: skipped stdin line 2 (no key separator ':'): b'no separator'"
    assert summary.startswith(f"produced 2 records to {topic} in ")
    assert summary.endswith(" (1 bad line skipped)")
    docs = run("consume", topic, "--from", "beginning", "-n", "3", "--format", "json").stdout
    assert [(d["key"], d["value"]) for d in map(json.loads, docs.splitlines())] == [
        ("k0", "v0"),
        ("k0", "v0"),
        ("k2", "v2"),
    ]
    data = tmp_path / "data.txt"
    data.write_text("a:1\nb:2\n\nc\n")
    from_file = run("produce", topic, "-K", ":", "-f", str(data), check=False)
    assert from_file.returncode == 1
    assert f"pykaf: {data} line 3 has no key separator ':': b''" in from_file.stderr
    needs_k = run("produce", topic, "--skip-bad-lines", stdin="x\n", check=False)
    assert needs_k.returncode == 2 and "--skip-bad-lines skips lines" in needs_k.stderr
    empty = run("produce", topic, "-K", "", stdin="x\n", check=False)
    assert empty.returncode == 2 and "-K takes a separator" in empty.stderr


def test_perf_produce_creates_its_topic_as_produce_does(cli: tuple[Any, Run]) -> None:
    _, run = cli
    topic = unique("cli-perf-new")
    produced = json.loads(
        run("perf", "produce", topic, "-n", "300", "--chunk", "100", "--json").stdout
    )
    assert produced["records"] == 300 and produced["failed"] == 0
    assert json.loads(run("perf", "consume", topic, "-n", "300", "--json").stdout)["records"] == 300
    refused = run(
        "perf", "produce", unique("cli-perf-new"), "-n", "1", "-X",
        "allow_auto_create_topics=false", check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and "UnknownTopicOrPartitionError" in refused.stderr


def test_a_closed_pipe_ends_consume_quietly(fake_cluster: Any) -> None:
    topic = unique("cli-pipe")
    fake_cluster.create_topic(topic, 1)
    pykaf_command("produce", topic, bootstrap=fake_cluster.bootstrap, stdin="x\n" * 50_000)
    env = {**os.environ, "PYKAF_BOOTSTRAP_SERVERS": fake_cluster.bootstrap}
    pipeline = subprocess.run(
        f"{sys.executable} -m pykaf consume {topic} --from beginning -n 50000 | head -n 2",
        shell=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert pipeline.stdout == "x\nx\n"
    assert "Traceback" not in pipeline.stderr and "BrokenPipe" not in pipeline.stderr


def test_demo_subcommand() -> None:
    done = pykaf_command("demo", "codec", "--records", "1000", "--repeat", "1")
    assert "zstd" in done.stdout


def test_perf_produce_then_consume(cli: tuple[Any, Run]) -> None:
    _, run = cli
    topic = unique("cli-perf")
    run("topics", "create", topic, "-p", "2")
    produced = json.loads(
        run("perf", "produce", topic, "-n", "20000", "-s", "50", "--chunk", "500", "--json").stdout
    )
    assert produced["records"] == 20000 and produced["failed"] == 0
    assert produced["records_per_s"] > 0
    latency = produced["chunk_latency_ms"]
    assert 0 <= latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    consumed = json.loads(run("perf", "consume", topic, "-n", "20000", "--json").stdout)
    assert consumed["records"] == 20000 and consumed["value_bytes"] == 20000 * 50
    assert consumed["batches"] >= 1
    table = run("perf", "produce", topic, "-n", "1000").stdout.splitlines()
    assert table[0].split()[:3] == ["test", "records", "seconds"]
    assert table[1].split()[:2] == ["produce", "1,000"]
    # a consume that cannot reach its count fails after the idle timeout
    short = run("perf", "consume", topic, "-n", "999999", "-t", "1", "--json", check=False)
    assert short.returncode == 1 and json.loads(short.stdout)["records"] == 21000


PACED = ("--rate", "5000", "--chunk", "100", "--json")


def test_perf_ctrl_c_ends_with_a_summary_of_what_was_done(cli: tuple[Any, Run]) -> None:
    broker, run = cli
    topic = unique("cli-perf-int")
    run("topics", "create", topic, "-p", "1")
    env = {**os.environ, "PYKAF_BOOTSTRAP_SERVERS": broker.bootstrap}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykaf", "perf", "produce", topic, "-n", "100000000", *PACED],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        with pykaf.sync.Admin(broker.bootstrap) as admin:
            deadline = time.monotonic() + 60  # a hang guard
            while admin.list_offsets({(topic, 0): pykaf.NEWEST})[(topic, 0)] == 0:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
            written = admin.list_offsets({(topic, 0): pykaf.NEWEST})[(topic, 0)]
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["interrupted"] is True
    # every acknowledged record counted, none lost in the stop
    assert summary["records"] == written > 0 and summary["failed"] == 0
    assert "interrupted after" in err
    assert "Traceback" not in err and "ProducerBatch" not in err


def test_perf_help_shows_the_defaults() -> None:
    for test, default in (("produce", "1000000"), ("consume", "30.0")):
        text = pykaf_command("perf", test, "-h").stdout
        assert f"(default: {default})" in text, text


def test_percentiles() -> None:
    from pykaf.cli._perf import percentiles

    assert percentiles([]) == {}
    assert percentiles([5.0]) == {"p50": 5.0, "p95": 5.0, "p99": 5.0, "max": 5.0}
    many = percentiles([float(i) for i in range(1, 101)])
    assert many == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}


def test_topic_configs_are_shown_and_altered(cli: tuple[Any, Run]) -> None:
    _, run = cli
    topic = unique("cli-cfg")
    run("topics", "create", topic, "-p", "1", "-c", "cleanup.policy=compact")
    altered = run(
        "topics", "alter", topic, "--set", "retention.ms=5000", "--append", "cleanup.policy=delete"
    )
    assert altered.stdout.strip() == f"altered {topic} (2 configs)"
    shown = json.loads(run("topics", "configs", topic, "--all", "--json").stdout)
    assert shown["retention.ms"]["value"] == "5000"
    assert shown["cleanup.policy"]["value"] == "compact,delete"
    run(
        "topics", "alter", topic, "--subtract", "cleanup.policy=compact", "--delete", "retention.ms"
    )
    table = run("topics", "configs", topic, "--all").stdout
    assert any(line.split()[:2] == ["cleanup.policy", "delete"] for line in table.splitlines())
    usage = run("topics", "alter", topic, check=False)
    assert usage.returncode == 2 and "nothing to change" in usage.stderr
    # a repeated --set is refused, not half-applied
    twice = run("topics", "alter", topic, "--set", "retention.ms=1", "--set", "retention.ms=2",
                check=False)  # fmt: skip
    assert twice.returncode == 2 and "retention.ms is changed twice" in twice.stderr


def test_acls_commands(kafka_or_fake: Any) -> None:
    # Kafka's ACLs are the session's: a principal and topic of this test's own
    run = partial(pykaf_command, bootstrap=kafka_or_fake.bootstrap)
    principal, topic = f"User:{unique('cli-user')}", unique("cli-orders")
    grant = ("--resource-type", "topic", "--name", topic, "--principal", principal)
    run("acls", "create", *grant, "--operation", "read")
    run("acls", "create", *grant, "--operation", "write", "--permission", "deny", "--host", "h1")
    listed = json.loads(run("acls", "list", "--principal", principal, "--json").stdout)
    assert sorted((b["operation"], b["permission"], b["host"]) for b in listed) == [
        ("READ", "ALLOW", "*"),
        ("WRITE", "DENY", "h1"),
    ]
    table = run("acls", "list", "--resource-type", "topic", "--name", topic, "--pattern", "match")
    assert len(table.stdout.strip().splitlines()) == 1 + 2  # the header and two bindings
    everything = run("acls", "delete", check=False)
    assert everything.returncode == 2 and "--all" in everything.stderr
    deleted = json.loads(
        run("acls", "delete", "--principal", principal, "--permission", "deny", "--json").stdout
    )
    assert [b["operation"] for b in deleted] == ["WRITE"]
    assert len(json.loads(run("acls", "list", "--principal", principal, "--json").stdout)) == 1
    bad = run("acls", "create", *grant, "--operation", "juggle", check=False)
    assert bad.returncode == 2 and "'juggle' is not one of" in bad.stderr
    refused = run(
        "acls", "create", "--resource-type", "topic", "--name", "t", "--principal", "alice",
        "--operation", "read", check=False,
    )  # fmt: skip
    # Kafka 4.3 answers a principal without a type INVALID_REQUEST, and so does the fake
    assert refused.returncode == 1 and "InvalidRequestError" in refused.stderr
    assert "Could not parse principal from `alice`" in refused.stderr


def test_topics_alter_options_become_one_change_per_config() -> None:
    from pykaf.cli import parser
    from pykaf.cli._common import CliError
    from pykaf.cli._manage import _changes

    def changes(*options: str) -> dict[str, Any]:
        return _changes(parser().parse_args(["topics", "alter", "t", *options]))

    assert changes(
        "--append", "cleanup.policy=compact", "--append", "cleanup.policy=delete",
        "--set", "retention.ms=5", "--delete", "segment.ms",
    ) == {
        "cleanup.policy": pykaf.ConfigChange.append("compact", "delete"),
        "retention.ms": "5",
        "segment.ms": None,
    }  # fmt: skip
    for clash in (
        ["--append", "a=1", "--subtract", "a=2"],
        ["--set", "a=1", "--append", "a=2"],
        ["--delete", "a", "--delete", "a"],
    ):
        with pytest.raises(CliError, match="a is changed twice"):
            changes(*clash)
    with pytest.raises(CliError, match="--append a"):
        changes("--append", "a=")
