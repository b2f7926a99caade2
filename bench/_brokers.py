"""Brokers for the producer benchmarks: Tansu and librdkafka's mock cluster.

Both run in processes of their own, so that the benchmark process holds only
the client under test (its peak RSS is then the client's) and the broker's
work is not charged to the client's interpreter:

* :class:`TansuBench`: a Tansu broker (its own process already); topics are
  created and deleted with CreateTopics / DeleteTopics.
* :class:`FakeBench`: pykaf's own fake cluster (``python -m pykaf.testing``),
  which, unlike the mock, keeps transactions' semantics.
* :class:`MockBench`: librdkafka's mock cluster, which lives inside a
  librdkafka handle, so it is started in a child Python process
  (``python -m bench._brokers``) that creates and deletes topics on request
  over its stdin.

:meth:`BenchBroker.high_watermarks` reads each partition's high watermark
from a Fetch response, not from ListOffsets: Tansu 0.6 answers
ListOffsets(latest) wrongly once a batch holds more than one record (it
reported 9,086 for 20,000 records produced; see /work/shared/brokers.md),
while the high watermark in its Fetch responses is right (checked against
the record count on both brokers). It fetches from each partition's log
start offset (ListOffsets(earliest)), which the mock cluster moves up as it
drops old data (it keeps ~5 MB per partition). The requests are built from pykaf's
protocol classes and sent by pykaf's cluster client, not by the producer
under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import trio

import pykaf
import pykaf.protocol as P
from pykaf import errors
from pykaf.testing import MockCluster, TansuBroker

_FETCH = 1
_CREATE_TOPICS = 19
_DELETE_TOPICS = 20
# Fetch v11: topics by name (v13+ wants topic ids); both brokers accept it.
_FETCH_VERSION = 11
_COMMAND_TIMEOUT = 30.0


async def _fetch_high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark, from one Fetch per partition leader."""
    async with pykaf.open_client(bootstrap) as client:
        await client.refresh_metadata(topic)
        by_leader: dict[int, list[int]] = {}
        for partition in await client.partitions(topic):
            leader = await client.leader(topic, partition)
            by_leader.setdefault(leader.node_id, []).append(partition)
        # Fetch from the log start: the mock cluster keeps only ~5 MB a
        # partition and answers OFFSET_OUT_OF_RANGE below it.
        starts = {
            p: await client.get_offset(topic, p, pykaf.OLDEST)
            for partitions in by_leader.values()
            for p in partitions
        }
        marks: dict[int, int] = {}
        for node_id, partitions in by_leader.items():
            conn = await client.broker_connection(node_id)
            version = min(_FETCH_VERSION, conn.version_for(_FETCH))
            # Tansu answers an empty Fetch when max_wait_ms is 0: wait a little
            # (min_bytes=1 returns at once where there are records).
            request = P.FetchRequest(
                max_wait_ms=100,
                min_bytes=1,
                max_bytes=1 << 16,
                topics=[
                    P.FetchTopic(
                        topic=topic,
                        partitions=[
                            P.FetchPartition(
                                partition=p, fetch_offset=starts[p], partition_max_bytes=1024
                            )
                            for p in partitions
                        ],
                    )
                ],
            )
            response = await conn.request(request, version)
            for topic_response in response.responses:
                for part in topic_response.partitions:
                    err = errors.error_for_code(part.error_code)
                    if err is not None:
                        raise err(f"Fetch {topic}/{part.partition_index}: {err.description}")
                    marks[part.partition_index] = int(part.high_watermark)
        missing = sorted(set().union(*by_leader.values()) - set(marks))
        if missing:
            raise AssertionError(f"no Fetch answer for partitions {missing} of {topic}")
        return marks


class BenchBroker:
    """A broker the benchmarks produce to: a bootstrap address and topic admin."""

    name = ""

    @property
    def bootstrap(self) -> str:
        """``host:port[,host:port...]`` for a client's bootstrap servers."""
        raise NotImplementedError

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` with ``partitions`` partitions (replication factor 1)."""
        raise NotImplementedError

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic``, freeing what the broker stored for it."""
        raise NotImplementedError

    def high_watermarks(self, topic: str) -> dict[int, int]:
        """Partition -> high watermark (the offset the next record would get)."""
        return trio.run(_fetch_high_watermarks, self.bootstrap, topic)

    def close(self) -> None:
        """Stop the broker."""

    def __enter__(self) -> BenchBroker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- Tansu ---------------------------------------------------------------------------
async def _controller_request(bootstrap: str, request: Any, api_key: int) -> Any:
    async with pykaf.open_client(bootstrap) as client:
        controller = await client.controller()
        conn = await client.connect_to(controller)
        return await conn.request(request, conn.version_for(api_key))


class _AdminByRequests(BenchBroker):
    """A broker whose topics are made and removed with CreateTopics / DeleteTopics."""

    def create_topic(self, topic: str, partitions: int) -> None:
        """CreateTopics, checking the answer."""
        request = P.CreateTopicsRequest(
            topics=[P.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=30_000,
        )
        response = trio.run(_controller_request, self.bootstrap, request, _CREATE_TOPICS)
        for result in response.topics:
            err = errors.error_for_code(result.error_code)
            if err is not None:
                raise err(f"creating {topic}: {result.error_message or err.description}")

    def delete_topic(self, topic: str) -> None:
        """DeleteTopics (by name), checking the answer."""
        request = P.DeleteTopicsRequest(
            topics=[P.DeleteTopicState(name=topic)], topic_names=[topic], timeout_ms=30_000
        )
        response = trio.run(_controller_request, self.bootstrap, request, _DELETE_TOPICS)
        for result in response.responses:
            err = errors.error_for_code(result.error_code)
            if err is not None:
                raise err(f"deleting {topic}: {err.description}")


class TansuBench(_AdminByRequests):
    """A Tansu broker (memory storage) in its own process."""

    name = "tansu"

    def __init__(self) -> None:
        self._broker = TansuBroker().start()

    @property
    def bootstrap(self) -> str:
        """The broker's address."""
        return self._broker.bootstrap

    def close(self) -> None:
        """Stop Tansu."""
        self._broker.stop()


# -- pykaf's fake cluster ---------------------------------------------------------------
class FakeBench(_AdminByRequests):
    """pykaf's fake cluster (``python -m pykaf.testing``) in a child process."""

    name = "fake"

    def __init__(self, brokers: int = 3) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pykaf.testing", "--brokers", str(brokers)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self._bootstrap = self._proc.stdout.readline().strip()
        if not self._bootstrap:
            self.close()
            raise RuntimeError("python -m pykaf.testing did not start")

    @property
    def bootstrap(self) -> str:
        """Every broker's address."""
        return self._bootstrap

    def close(self) -> None:
        """Stop the child process."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(_COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


# -- librdkafka mock cluster ----------------------------------------------------------
class MockBench(BenchBroker):
    """librdkafka's mock cluster with ``brokers`` brokers, in a child process."""

    name = "mock"

    def __init__(self, brokers: int = 3) -> None:
        root = str(Path(pykaf.__file__).resolve().parent.parent)
        bench_root = str(Path(__file__).resolve().parent.parent)
        path = [root, bench_root, *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench._brokers", str(brokers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()
        try:
            ready = self._read_line()
            if not ready.startswith("ready "):
                raise RuntimeError(f"the mock cluster process said {ready!r}")
            self._bootstrap, self.librdkafka_version = ready.split()[1:3]
        except BaseException:
            self.close()
            raise

    @property
    def bootstrap(self) -> str:
        """The mock brokers' addresses."""
        return self._bootstrap

    def _read_line(self) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait(timeout=_COMMAND_TIMEOUT)
            raise RuntimeError(f"the mock cluster process exited ({code})")
        return line.strip()

    def _command(self, *words: str) -> None:
        with self._lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write(" ".join(words) + "\n")
            self._proc.stdin.flush()
            answer = self._read_line()
        if answer != "ok":
            raise RuntimeError(f"mock cluster: {' '.join(words)}: {answer}")

    def create_topic(self, topic: str, partitions: int) -> None:
        """rd_kafka_mock_topic_create (leaders spread over the brokers)."""
        self._command("create", topic, str(partitions))

    def delete_topic(self, topic: str) -> None:
        """rd_kafka_mock_topic_delete."""
        self._command("delete", topic)

    def set_group_initial_rebalance_delay(self, delay_ms: int) -> None:
        """The brokers' ``group.initial.rebalance.delay.ms`` (librdkafka's mock: 3000)."""
        self._command("group-delay", str(delay_ms))

    def close(self) -> None:
        """End the child process (closing its stdin makes it destroy the cluster)."""
        proc = self._proc
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _serve_mock(brokers: int, stdin: IO[str], stdout: IO[str]) -> None:
    """The child process: run a mock cluster, obey commands until stdin closes."""
    with MockCluster(brokers) as cluster:
        print("ready", cluster.bootstrap, cluster.librdkafka_version, file=stdout, flush=True)
        for line in stdin:
            words = line.split()
            try:
                if words[:1] == ["create"] and len(words) == 3:
                    cluster.create_topic(words[1], partitions=int(words[2]))
                elif words[:1] == ["delete"] and len(words) == 2:
                    cluster.delete_topic(words[1])
                elif words[:1] == ["group-delay"] and len(words) == 2:
                    cluster.set_group_initial_rebalance_delay(int(words[1]))
                else:
                    raise ValueError(f"unknown command {line.strip()!r}")
            except Exception as exc:  # reported to the parent, which raises
                print(f"error {type(exc).__name__}: {exc}", file=stdout, flush=True)
            else:
                print("ok", file=stdout, flush=True)


if __name__ == "__main__":
    _serve_mock(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.stdin, sys.stdout)
