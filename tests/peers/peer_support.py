"""Helpers of the peer-client tests: Kafka's Java tools, sarama and franz-go beside pykaf.

- :class:`JavaTools` (the ``java_tools`` fixture): runs classes of Kafka's
  own jars (the cluster's class path) with a log configuration that keeps
  stdout for the tools' output (their JSON events) and sends Kafka's client
  logging (WARN and above) to stderr.
- :func:`build_go_peer` (the ``go_peer`` fixture): the Go program of
  ``tests/peers/go`` (sarama and franz-go), built once per content of its
  ``go.mod``, ``go.sum`` and sources into
  ``~/.cache/pykaf/go-peers/<hash>/peer`` and reused while they do not
  change. Without ``go`` on the PATH the tests fail, saying what to install.
- :class:`JsonProcess` / :func:`open_json_process`: a running peer whose
  stdout is JSON lines, read as they come, with bounded waits on them.
- :func:`run_json`: run a peer to its end and return its JSON events.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import pykaf
from pykaf.testing import KafkaCluster

Row = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value

GO_DIR = Path(__file__).resolve().parent / "go"
GO_BUILD_TIMEOUT = 900.0  # a fresh machine downloads the modules first

_QUIET_LOG4J = """\
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
"""


def unique(prefix: str) -> str:
    """A topic, group or transactional id no other test of the session uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def b64(data: str | None) -> bytes | None:
    """A key, value or header value as the Go peer prints it (base64, or null)."""
    return None if data is None else base64.b64decode(data)


class JavaTools:
    """Command lines for Kafka's Java tools and clients, from the cluster's own jars."""

    def __init__(self, cluster: KafkaCluster, directory: Path) -> None:
        self.cluster = cluster
        self.directory = directory
        self.log_config = directory / "log4j2-quiet.yaml"
        self.log_config.write_text(_QUIET_LOG4J)

    def command(self, main_class: str, *args: str) -> list[str]:
        """``java ... main_class args``, logging to stderr only."""
        cmd = self.cluster.java_command(main_class, *args)
        return [
            f"-Dlog4j2.configurationFile={self.log_config}"
            if arg.startswith("-Dlog4j2.configurationFile=")
            else arg
            for arg in cmd
        ]

    def properties(self, **props: str) -> str:
        """Write a properties file (dots for underscores in names); return its path."""
        path = self.directory / f"{unique('client')}.properties"
        path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in props.items()))
        return str(path)


def _go_digest(go: str) -> str:
    digest = hashlib.sha256()
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout
    digest.update(version.encode())
    for path in sorted(GO_DIR.iterdir()):
        if path.name in ("go.mod", "go.sum") or path.suffix == ".go":
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_go_peer() -> Path:
    """Build (or find already built) the Go peer program; return its path."""
    go = shutil.which("go")
    if go is None:
        pytest.fail(
            "the sarama and franz-go peer tests need Go on the PATH (https://go.dev/dl/ or a "
            "distribution's golang package; 1.26+, or 1.21+ which fetches the 1.26 toolchain "
            "tests/peers/go/go.mod asks for) and the Go module proxy, to fetch "
            "github.com/IBM/sarama and github.com/twmb/franz-go on the first build"
        )
    cache_root = Path(
        os.environ.get("PYKAF_GO_PEERS_CACHE", Path.home() / ".cache" / "pykaf" / "go-peers")
    )
    binary = cache_root / _go_digest(go) / "peer"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=binary.parent, prefix=".peer-")
    os.close(fd)
    try:
        result = subprocess.run(
            [go, "build", "-mod=mod", "-buildvcs=false", "-o", tmp, "."],
            cwd=GO_DIR,
            capture_output=True,
            text=True,
            timeout=GO_BUILD_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(f"building the Go peer failed ({go} build in {GO_DIR}):\n{result.stderr}")
        os.replace(tmp, binary)  # atomic: a concurrent session sees all of it or nothing
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return binary


# --------------------------------------------------------------------------- processes


class JsonProcess:
    """A running peer that prints JSON events, one a line, on stdout."""

    def __init__(self, name: str, process: trio.Process) -> None:
        self.name = name
        self.process = process
        self.events: list[dict[str, Any]] = []
        self.other_lines: list[str] = []
        self.stderr = bytearray()
        self._changed = trio.Event()
        self.stdout_closed = False

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        while True:
            chunk = await self.process.stdout.receive_some(65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                text = line.decode(errors="replace").strip()
                if text.startswith("{"):
                    self.events.append(json.loads(text))
                elif text:
                    self.other_lines.append(text)
            self._wake()
        self.stdout_closed = True
        self._wake()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.receive_some(65536):
            self.stderr += chunk
            del self.stderr[: max(0, len(self.stderr) - 20000)]

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def describe(self) -> str:
        """The process's state, for failure messages."""
        tail = self.stderr.decode(errors="replace")[-4000:]
        return (
            f"{self.name} (exit status {self.process.returncode}); "
            f"last events {self.events[-5:]!r}; other output {self.other_lines[-5:]!r}; "
            f"stderr:\n{tail}"
        )

    def of(self, kind: str, key: str = "name") -> list[dict[str, Any]]:
        """The events so far whose ``key`` field (``name`` or ``event``) is ``kind``."""
        return [e for e in self.events if e.get(key) == kind]

    async def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        """Wait until ``predicate()`` is truthy (checked as events arrive); return it."""
        with trio.move_on_after(timeout):
            while True:
                result = predicate()
                if result:
                    return result
                if self.stdout_closed:
                    pytest.fail(f"{self.name} ended before {what}: {self.describe()}")
                # New events wake us; so does a short tick, for predicates that
                # also look at other things (a pykaf member's state).
                with trio.move_on_after(0.2):
                    await self._changed.wait()
        pytest.fail(f"{self.name}: no {what} within {timeout} s: {self.describe()}")

    async def wait_exit(self, timeout: float = 60.0) -> int:
        """Wait for the process to end by itself; fail if it does not or fails."""
        with trio.move_on_after(timeout):
            code = await self.process.wait()
            while not self.stdout_closed:
                await self._changed.wait()
            if code != 0:
                pytest.fail(f"{self.describe()}")
            return code
        pytest.fail(f"{self.name} did not end within {timeout} s: {self.describe()}")

    async def close_stdin(self) -> None:
        """Close the process's stdin (the Go group member leaves the group on it)."""
        if self.process.stdin is not None:
            await self.process.stdin.aclose()

    def terminate(self) -> None:
        """SIGTERM (Kafka's tools close their client in a shutdown hook)."""
        if self.process.returncode is None:
            self.process.terminate()


@asynccontextmanager
async def open_json_process(name: str, cmd: Sequence[str]) -> AsyncIterator[JsonProcess]:
    """Start ``cmd``; on leaving, stop it (SIGTERM, then SIGKILL after 10 s)."""
    process = await trio.lowlevel.open_process(
        list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    peer = JsonProcess(name, process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer._read_stdout)
            nursery.start_soon(peer._read_stderr)
            try:
                yield peer
            finally:
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        process.terminate()
                        with trio.move_on_after(10):
                            await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()


async def run_json(name: str, cmd: Sequence[str], timeout: float = 90.0) -> list[dict[str, Any]]:
    """Run ``cmd`` to its end (at most ``timeout`` s) and return its JSON events."""
    async with open_json_process(name, cmd) as peer:
        await peer.wait_exit(timeout)
        return peer.events


# --------------------------------------------------------------------------- pykaf


async def read_all(
    bootstrap: str, topic: str, partitions: int, *, isolation_level: str = "read_committed"
) -> list[Row]:
    """Every record of ``topic`` up to its end, as rows sorted by partition and offset."""
    rows: list[Row] = []
    async with pykaf.open_admin(bootstrap) as admin:
        ends = await admin.list_offsets(
            {(topic, p): pykaf.NEWEST for p in range(partitions)},
            isolation_level=isolation_level,
        )
    async with pykaf.open_consumer(bootstrap, isolation_level=isolation_level) as consumer:
        for p in range(partitions):
            end = ends[(topic, p)]
            if end == 0:
                continue
            pc = await consumer.consume_partition(topic, p, pykaf.OLDEST)
            with trio.fail_after(60):
                while pc.position < end:
                    for r in await pc.next_batch():
                        rows.append((r.partition, r.offset, r.key, r.value))
    return sorted(rows, key=lambda row: (row[0], row[1]))


class Recorder:
    """A pykaf group handler that keeps what it reads and its assignments."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.assignments: list[set[int]] = []  # per generation; set() after each ends
        self.changed = trio.Event()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def setup(self, session: Any) -> None:
        self.assignments.append({p for ps in session.claims.values() for p in ps})
        self._wake()

    async def consume_claim(self, session: Any, claim: Any) -> None:
        async for r in claim:
            self.rows.append((r.partition, r.offset, r.key, r.value))
            session.mark_message(r)
            self._wake()

    async def cleanup(self, session: Any) -> None:
        self.assignments.append(set())  # the generation ended: nothing is owned until setup
        self._wake()

    async def wait_for(self, predicate: Any, what: str, timeout: float = 60.0) -> None:
        with trio.move_on_after(timeout):
            while not predicate():
                with trio.move_on_after(0.2):  # the predicate may look at a peer too
                    await self.changed.wait()
            return
        pytest.fail(f"pykaf member: no {what} within {timeout} s: {self.assignments}")


async def write_interleaved_transactions(
    bootstrap: str, topic: str, *, rounds: int = 6, compression: str = "none"
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """Two pykaf transactional producers interleave batches of 5 keyed records.

    Each round both write 10 records (two batches each, alternating, so their
    batches interleave in the log); then one commits and the other aborts, in
    turns. Returns the committed and the aborted (key, value) pairs.
    """
    committed: list[tuple[bytes, bytes]] = []
    aborted: list[tuple[bytes, bytes]] = []
    async with (
        pykaf.open_producer(
            bootstrap, transactional_id=unique("txn-a"), compression=compression
        ) as a,
        pykaf.open_producer(
            bootstrap, transactional_id=unique("txn-b"), compression=compression
        ) as b,
    ):
        for round_ in range(rounds):
            a.begin_transaction()
            b.begin_transaction()
            sent: dict[bytes, list[tuple[bytes, bytes]]] = {b"a": [], b"b": []}
            for half in range(2):
                for name, producer in ((b"a", a), (b"b", b)):
                    for i in range(half * 5, half * 5 + 5):
                        key, value = b"%s-%d" % (name, i % 3), b"%s-%d-%d" % (name, round_, i)
                        producer.send_nowait(topic, value, key=key)
                        sent[name].append((key, value))
                    await producer.flush()
            winner = b"a" if round_ % 2 == 0 else b"b"
            for name, producer in ((b"a", a), (b"b", b)):
                if name == winner:
                    await producer.commit_transaction()
                    committed.extend(sent[name])
                else:
                    await producer.abort_transaction()
                    aborted.extend(sent[name])
    return committed, aborted
