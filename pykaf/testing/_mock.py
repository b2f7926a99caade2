"""Drive librdkafka's mock Kafka cluster from Python, through ctypes.

The confluent-kafka wheel ships librdkafka, and librdkafka contains a mock
cluster: several in-process brokers on loopback ports that speak enough of the
Kafka protocol for producers, consumers, groups and transactions, and that a
test can steer (move partition leaders, take brokers down, inject error codes
and latency, record the requests it received). :class:`MockCluster` wraps that
C API (``rdkafka_mock.h``). Any Kafka client can connect to it, not only
librdkafka.

What the mock does not do (see ``/work/shared/brokers.md``): CreateTopics and
DeleteTopics (use :meth:`MockCluster.create_topic`, or let topics be
auto-created with 4 partitions), SASL, TLS (put a
:class:`~pykaf.testing.TLSProxy` in front of each broker), sequence and epoch
checks, aborted-transaction lists.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, NamedTuple, Protocol, TypeAlias

__all__ = [
    "ALL_BROKERS",
    "MockCluster",
    "MockClusterError",
    "MockRequest",
    "find_librdkafka",
]

ALL_BROKERS = -1
"""A broker id that addresses every broker, for the calls that accept it."""

_LIB_ENV = "PYKAF_LIBRDKAFKA"  # path of a librdkafka to use instead of the wheel's
_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0
_ERRSTR_SIZE = 512
_VARARG_CHUNK = 64  # (error, rtt) pairs passed per variadic call
_COORDINATOR_TYPES = ("group", "transaction")
# librdkafka's mock thread serves its command queue, then drains the pipe that
# woke it up. A command queued in between (the next call, made as soon as the
# previous one returned) loses its wake-up and waits for the thread's 1 s poll
# timeout: measured on 2.16.0, 1 call in 20 back to back, and most third calls
# on a new cluster. Leaving this much time between calls avoids it.
_OP_GAP = 0.002

_c_int16 = ctypes.c_int16
_c_int32 = ctypes.c_int32
_c_int64 = ctypes.c_int64
_c_int = ctypes.c_int
_c_size = ctypes.c_size_t
_c_str = ctypes.c_char_p
_c_ptr = ctypes.c_void_p

# name -> (restype, argtypes). The first group must exist; the others are bound
# when the loaded librdkafka exports them, and the methods using them raise
# MockClusterError otherwise. Every pointer is a c_void_p.
_REQUIRED: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_version_str": (_c_str, []),
    "rd_kafka_err2name": (_c_str, [_c_int]),
    "rd_kafka_err2str": (_c_str, [_c_int]),
    "rd_kafka_conf_new": (_c_ptr, []),
    "rd_kafka_conf_destroy": (None, [_c_ptr]),
    "rd_kafka_conf_set": (_c_int, [_c_ptr, _c_str, _c_str, _c_ptr, _c_size]),
    "rd_kafka_new": (_c_ptr, [_c_int, _c_ptr, _c_ptr, _c_size]),
    "rd_kafka_destroy": (None, [_c_ptr]),
    "rd_kafka_mock_cluster_new": (_c_ptr, [_c_ptr, _c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_ptr]),
    "rd_kafka_mock_cluster_bootstraps": (_c_str, [_c_ptr]),
}
_OPTIONAL: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_mock_topic_create": (_c_int, [_c_ptr, _c_str, _c_int, _c_int]),
    "rd_kafka_mock_topic_delete": (_c_int, [_c_ptr, _c_str]),
    "rd_kafka_mock_topic_set_error": (None, [_c_ptr, _c_str, _c_int]),
    "rd_kafka_mock_partition_set_leader": (_c_int, [_c_ptr, _c_str, _c_int32, _c_int32]),
    "rd_kafka_mock_partition_set_follower": (_c_int, [_c_ptr, _c_str, _c_int32, _c_int32]),
    "rd_kafka_mock_partition_set_follower_wmarks": (
        _c_int,
        [_c_ptr, _c_str, _c_int32, _c_int64, _c_int64],
    ),
    "rd_kafka_mock_broker_set_down": (_c_int, [_c_ptr, _c_int32]),
    "rd_kafka_mock_broker_set_up": (_c_int, [_c_ptr, _c_int32]),
    "rd_kafka_mock_broker_set_rtt": (_c_int, [_c_ptr, _c_int32, _c_int]),
    "rd_kafka_mock_broker_set_rack": (_c_int, [_c_ptr, _c_int32, _c_str]),
    "rd_kafka_mock_broker_set_host_port": (None, [_c_ptr, _c_int32, _c_str, _c_int]),
    "rd_kafka_mock_broker_add": (_c_int, [_c_ptr, _c_int32]),
    "rd_kafka_mock_broker_decommission": (_c_int, [_c_ptr, _c_int32]),
    # Variadic: only the fixed parameters are declared; ctypes passes the rest.
    "rd_kafka_mock_push_request_errors": (None, [_c_ptr, _c_int16, _c_size]),
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [_c_ptr, _c_int16, _c_size, ctypes.POINTER(_c_int)],
    ),
    "rd_kafka_mock_clear_request_errors": (None, [_c_ptr, _c_int16]),
    "rd_kafka_mock_broker_push_request_error_rtts": (
        _c_int,
        [_c_ptr, _c_int32, _c_int16, _c_size],
    ),
    "rd_kafka_mock_broker_error_stack_cnt": (
        _c_int,
        [_c_ptr, _c_int32, _c_int16, ctypes.POINTER(_c_size)],
    ),
    "rd_kafka_mock_set_controller_id": (None, [_c_ptr, _c_int32]),
    "rd_kafka_mock_coordinator_set": (_c_int, [_c_ptr, _c_str, _c_str, _c_int32]),
    "rd_kafka_mock_set_apiversion": (_c_int, [_c_ptr, _c_int16, _c_int16, _c_int16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_c_ptr, _c_int32]),
    "rd_kafka_mock_start_request_tracking": (None, [_c_ptr]),
    "rd_kafka_mock_stop_request_tracking": (None, [_c_ptr]),
    "rd_kafka_mock_clear_requests": (None, [_c_ptr]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_c_ptr), [_c_ptr, ctypes.POINTER(_c_size)]),
    "rd_kafka_mock_request_id": (_c_int32, [_c_ptr]),
    "rd_kafka_mock_request_api_key": (_c_int16, [_c_ptr]),
    "rd_kafka_mock_request_timestamp": (_c_int64, [_c_ptr]),
    "rd_kafka_mock_request_destroy": (None, [_c_ptr]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_c_ptr), _c_size]),
    "rd_kafka_mem_free": (None, [_c_ptr, _c_ptr]),
    # KIP-714: the subscription every client gets (librdkafka 2.5+).
    "rd_kafka_mock_telemetry_set_requested_metrics": (
        _c_int,
        [_c_ptr, ctypes.POINTER(_c_str), _c_size],
    ),
    "rd_kafka_mock_telemetry_set_push_interval": (_c_int, [_c_ptr, _c_int64]),
}


class MockClusterError(RuntimeError):
    """The mock cluster could not be created, or refused a command.

    Attributes:
        code: librdkafka's error code when the C API returned one, else None.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class MockRequest(NamedTuple):
    """One request a mock broker received while request tracking was on.

    librdkafka records no API version per request, so none is given here.
    """

    broker_id: int
    """The id of the broker that received the request."""
    api_key: int
    """The request's Kafka API key (0 = Produce, 1 = Fetch, 3 = Metadata, ...)."""
    timestamp_us: int
    """When it arrived, in microseconds of librdkafka's monotonic clock."""


class _HasCode(Protocol):
    code: int


ErrorCode: TypeAlias = "int | _HasCode | type[_HasCode]"
"""A Kafka error code: an int, or a pykaf error class or instance (its ``code``)."""


def _error_code(err: ErrorCode) -> int:
    """The integer code of ``err`` (an int, or anything with an int ``code``)."""
    if isinstance(err, int):
        return int(err)
    code = getattr(err, "code", None)
    if isinstance(code, int):
        return code
    raise TypeError(f"not a Kafka error code: {err!r}")


def find_librdkafka() -> str:
    """Return the path of the librdkafka shared library to drive the mock with.

    Looks, in order, at ``$PYKAF_LIBRDKAFKA``, the copy bundled in the
    confluent-kafka wheel (``confluent_kafka.libs/librdkafka-*.so*`` on Linux,
    ``confluent_kafka/.dylibs`` on macOS, ``confluent_kafka`` itself on
    Windows) and a system-wide ``librdkafka``, which a source-built
    confluent-kafka links against. confluent-kafka is located, not imported.

    Raises:
        MockClusterError: no librdkafka was found.
    """
    override = os.environ.get(_LIB_ENV)
    if override:
        if not os.path.exists(override):
            raise MockClusterError(f"${_LIB_ENV} names {override!r}, which does not exist")
        return override
    try:
        spec = importlib.util.find_spec("confluent_kafka")
    except (ImportError, ValueError):
        spec = None
    searched: list[str] = []
    if spec is not None and spec.submodule_search_locations:
        for pkg_dir in spec.submodule_search_locations:
            parent = os.path.dirname(pkg_dir)
            for folder in (
                os.path.join(parent, "confluent_kafka.libs"),
                os.path.join(pkg_dir, ".dylibs"),
                pkg_dir,
                os.path.join(parent, "confluent_kafka.libs", "lib"),
            ):
                searched.append(folder)
                for pattern in ("librdkafka*.so*", "librdkafka*.dylib", "librdkafka*.dll"):
                    found = sorted(glob.glob(os.path.join(glob.escape(folder), pattern)))
                    if found:
                        return found[0]
    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    if spec is None:
        raise MockClusterError(
            "the mock cluster lives in librdkafka, which comes with the "
            "'confluent-kafka' package; it is not installed: pip install 'pykaf[test]' "
            "(or pip install confluent-kafka)"
        )
    raise MockClusterError(
        "confluent-kafka is installed but no librdkafka shared library was found "
        f"(looked in {', '.join(searched)} and the system library path); "
        f"set ${_LIB_ENV} to its path"
    )


class _Library:
    """A loaded librdkafka with argument and result types declared."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.dll = ctypes.CDLL(path)
        except OSError as exc:
            raise MockClusterError(f"could not load librdkafka from {path}: {exc}") from exc
        self.functions: dict[str, Any] = {}
        for table, required in ((_REQUIRED, True), (_OPTIONAL, False)):
            for name, (restype, argtypes) in table.items():
                try:
                    func = getattr(self.dll, name)
                except AttributeError:
                    if required:
                        raise MockClusterError(
                            f"{path} does not export {name}: it is not a librdkafka "
                            "with the mock cluster (librdkafka >= 1.3)"
                        ) from None
                    continue
                func.restype = restype
                func.argtypes = argtypes
                self.functions[name] = func
        self.version: str = self.call("rd_kafka_version_str").decode()

    def has(self, name: str) -> bool:
        """Whether the library exports ``name``."""
        return name in self.functions

    def func(self, name: str) -> Any:
        """The bound C function ``name``.

        Raises:
            MockClusterError: this librdkafka does not export it.
        """
        try:
            return self.functions[name]
        except KeyError:
            raise MockClusterError(
                f"librdkafka {self.version} ({self.path}) does not export {name}"
            ) from None

    def call(self, name: str, *args: Any) -> Any:
        """Call the C function ``name`` with ``args``."""
        return self.func(name)(*args)

    def err_name(self, code: int) -> str:
        """The name and description librdkafka gives an error code."""
        name = self.call("rd_kafka_err2name", code).decode(errors="replace")
        text = self.call("rd_kafka_err2str", code).decode(errors="replace")
        return f"{name} ({code}): {text}"


_libraries: dict[str, _Library] = {}
_libraries_lock = threading.Lock()


def _load(path: str | None) -> _Library:
    """Load (once per path) and return the librdkafka at ``path`` or the default one."""
    path = path or find_librdkafka()
    with _libraries_lock:
        lib = _libraries.get(path)
        if lib is None:
            lib = _libraries[path] = _Library(path)
        return lib


def _destroy(lib: _Library, cluster: int, handle: int) -> None:
    """Safety net run by ``weakref.finalize``: the cluster first, then its handle."""
    try:
        lib.call("rd_kafka_mock_cluster_destroy", cluster)
    finally:
        lib.call("rd_kafka_destroy", handle)


def _encode(text: str) -> bytes:
    return text.encode()


class MockCluster:
    """A librdkafka mock Kafka cluster with ``num_brokers`` brokers on loopback.

    Example:
        >>> with MockCluster(3) as cluster:  # doctest: +SKIP
        ...     cluster.create_topic("orders", partitions=6)
        ...     producer = Producer({"bootstrap.servers": cluster.bootstrap})

    Broker ids run from 1 to ``num_brokers``; each broker listens on its own
    OS-assigned port of 127.0.0.1. Topics a client asks for are auto-created
    with 4 partitions (the mock's default) unless created first with
    :meth:`create_topic`. The cluster has no controller until
    :meth:`set_controller` is called. Calls that take a ``broker_id`` accept
    :data:`ALL_BROKERS` (-1) where librdkafka does (``broker_down``,
    ``broker_up``, ``set_rtt``, ``set_rack``).

    The cluster runs in a librdkafka thread and needs no event loop; every
    method blocks only until the mock thread has applied the change. Use it as
    a context manager or call :meth:`start` and :meth:`close`; a cluster left
    open is destroyed when the object is garbage-collected or at interpreter
    exit.

    Args:
        num_brokers: how many brokers (at least 1).
        library: path of the librdkafka shared library; by default the one
            inside the installed confluent-kafka (see :func:`find_librdkafka`).
        config: extra librdkafka properties for the internal handle that owns
            the cluster, e.g. ``{"debug": "mock"}`` to log what the mock does.
        log_level: syslog level for that handle's log (default 3: errors only;
            it would otherwise warn that it has no ``bootstrap.servers``).
    """

    def __init__(
        self,
        num_brokers: int = 3,
        *,
        library: str | None = None,
        config: Mapping[str, str] | None = None,
        log_level: int = 3,
    ) -> None:
        if num_brokers < 1:
            raise ValueError("num_brokers must be at least 1")
        self._num_brokers = num_brokers
        self._library_path = library
        self._config = {"log_level": str(log_level), **dict(config or {})}
        self._lib: _Library | None = None
        self._handle: int | None = None
        self._cluster: int | None = None
        self._bootstrap = ""
        self._listeners: dict[int, tuple[str, int]] = {}
        self._finalizer: weakref.finalize[..., MockCluster] | None = None
        self._op_lock = threading.Lock()
        self._next_op_at = 0.0

    # -- properties ------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the cluster exists (started and not closed)."""
        return self._cluster is not None

    @property
    def num_brokers(self) -> int:
        """The number of brokers the cluster was created with."""
        return self._num_brokers

    @property
    def broker_ids(self) -> list[int]:
        """The ids of the brokers the cluster was created with: 1..num_brokers."""
        return list(range(1, self._num_brokers + 1))

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:P1,127.0.0.1:P2,..."``, for a client's ``bootstrap.servers``.

        Raises:
            MockClusterError: the cluster is not running.
        """
        self._ptr()
        return self._bootstrap

    @property
    def listeners(self) -> dict[int, tuple[str, int]]:
        """Broker id -> the (host, port) that broker listens on.

        These stay the same after :meth:`set_broker_address` changes what a
        broker advertises.

        Raises:
            MockClusterError: the cluster is not running.
        """
        self._ptr()
        return dict(self._listeners)

    @property
    def librdkafka_version(self) -> str:
        """The version of the librdkafka in use, e.g. ``"2.16.0"``."""
        return self._library().version

    @property
    def library_path(self) -> str:
        """The path of the librdkafka shared library in use."""
        return self._library().path

    def supports(self, function: str) -> bool:
        """Whether the loaded librdkafka exports the C function ``function``.

        Example: ``cluster.supports("rd_kafka_mock_broker_set_host_port")``.
        """
        return self._library().has(function)

    # -- life cycle ------------------------------------------------------
    def start(self) -> MockCluster:
        """Create the cluster.

        Returns:
            self, so that ``cluster = MockCluster(3).start()`` works.

        Raises:
            MockClusterError: librdkafka is missing, rejected a configuration
                property, or could not create the cluster.
        """
        if self.running:
            raise MockClusterError("the mock cluster is already running")
        lib = self._library()
        conf = lib.call("rd_kafka_conf_new")
        if not conf:
            raise MockClusterError("rd_kafka_conf_new failed")
        errbuf = ctypes.create_string_buffer(_ERRSTR_SIZE)
        try:
            for key, value in self._config.items():
                res = lib.call(
                    "rd_kafka_conf_set", conf, _encode(key), _encode(value), errbuf, _ERRSTR_SIZE
                )
                if res != _RD_KAFKA_CONF_OK:
                    raise MockClusterError(
                        f"librdkafka rejected {key}={value!r}: {errbuf.value.decode()}"
                    )
            handle = lib.call("rd_kafka_new", _RD_KAFKA_PRODUCER, conf, errbuf, _ERRSTR_SIZE)
        except BaseException:
            lib.call("rd_kafka_conf_destroy", conf)
            raise
        if not handle:  # rd_kafka_new leaves conf with the caller when it fails
            lib.call("rd_kafka_conf_destroy", conf)
            raise MockClusterError(f"rd_kafka_new failed: {errbuf.value.decode()}")
        cluster = lib.call("rd_kafka_mock_cluster_new", handle, self._num_brokers)
        if not cluster:
            lib.call("rd_kafka_destroy", handle)
            raise MockClusterError(
                f"rd_kafka_mock_cluster_new({self._num_brokers}) failed "
                "(run with config={'debug': 'mock'} to see why)"
            )
        self._handle = handle
        self._cluster = cluster
        self._finalizer = weakref.finalize(self, _destroy, lib, cluster, handle)
        self._finalizer.atexit = True
        self._bootstrap = lib.call("rd_kafka_mock_cluster_bootstraps", cluster).decode()
        # librdkafka builds the list once, from brokers 1..N in order.
        self._listeners = {}
        for broker_id, address in enumerate(self._bootstrap.split(","), start=1):
            host, _, port = address.rpartition(":")
            self._listeners[broker_id] = (host, int(port))
        return self

    def close(self) -> None:
        """Destroy the cluster, then the librdkafka handle that owns it.

        Clients still connected see their connections drop. Safe to call more
        than once, and when the cluster never started.
        """
        with self._op_lock:
            finalizer, self._finalizer = self._finalizer, None
            self._cluster = None
            self._handle = None
            if finalizer is not None:
                wait = self._next_op_at - time.monotonic()  # destroying is a command too
                if wait > 0:
                    time.sleep(wait)
                finalizer()

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self._bootstrap if self.running else "closed"
        return f"<MockCluster {self._num_brokers} brokers {where}>"

    # -- helpers ---------------------------------------------------------
    def _library(self) -> _Library:
        if self._lib is None:
            self._lib = _load(self._library_path)
        return self._lib

    def _ptr(self) -> int:
        if self._cluster is None:
            raise MockClusterError("the mock cluster is not running")
        return self._cluster

    def _call(self, name: str, *args: Any) -> Any:
        """Call ``name(cluster, *args)``, spaced from the previous call (see _OP_GAP)."""
        lib = self._library()
        func = lib.func(name)  # raises before the running check hides a missing export
        with self._op_lock:
            ptr = self._ptr()
            wait = self._next_op_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                return func(ptr, *args)
            finally:
                self._next_op_at = time.monotonic() + _OP_GAP

    def _check(self, what: str, name: str, *args: Any) -> None:
        """Call ``name`` and raise MockClusterError if it returns an error code."""
        err = self._call(name, *args)
        if err:
            raise MockClusterError(f"{what} failed: {self._library().err_name(err)}", err)

    # -- topics and partitions -------------------------------------------
    def create_topic(self, name: str, partitions: int = 4, replication_factor: int = 1) -> None:
        """Create topic ``name`` (the mock has no CreateTopics API).

        Leaders are spread over the brokers. Creating a topic that exists is
        an error.

        Raises:
            MockClusterError: librdkafka refused (e.g. TOPIC_ALREADY_EXISTS).
        """
        self._check(
            f"creating topic {name!r}",
            "rd_kafka_mock_topic_create",
            _encode(name),
            partitions,
            replication_factor,
        )

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name`` (needs librdkafka >= 2.12).

        Raises:
            MockClusterError: librdkafka refused, or lacks the function.
        """
        self._check(f"deleting topic {name!r}", "rd_kafka_mock_topic_delete", _encode(name))

    def set_topic_error(self, name: str, error: ErrorCode) -> None:
        """Make Metadata (and AddPartitionsToTxn) report ``error`` for topic ``name``.

        Pass 0 to clear it.
        """
        self._call("rd_kafka_mock_topic_set_error", _encode(name), _error_code(error))

    def set_partition_leader(self, topic: str, partition: int, broker_id: int | None) -> None:
        """Make ``broker_id`` the leader of ``topic``/``partition``.

        The topic is created if it does not exist. ``None`` (or -1) leaves the
        partition without a leader. Clients learn of the change from their
        next Metadata request, or from NOT_LEADER_OR_FOLLOWER answers.

        Raises:
            MockClusterError: e.g. an unknown broker or partition.
        """
        self._check(
            f"setting the leader of {topic}/{partition} to {broker_id}",
            "rd_kafka_mock_partition_set_leader",
            _encode(topic),
            partition,
            -1 if broker_id is None else broker_id,
        )

    def set_partition_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` the preferred replica that fetches are redirected to.

        Consumers with a ``client.rack`` that fetch from the leader are told to
        fetch from this follower instead (KIP-392). The broker id need not exist.
        """
        self._check(
            f"setting the follower of {topic}/{partition} to {broker_id}",
            "rd_kafka_mock_partition_set_follower",
            _encode(topic),
            partition,
            broker_id,
        )

    def set_partition_follower_watermarks(
        self, topic: str, partition: int, low: int, high: int
    ) -> None:
        """Set the low and high watermarks the follower reports (-1: the leader's)."""
        self._check(
            f"setting the follower watermarks of {topic}/{partition}",
            "rd_kafka_mock_partition_set_follower_wmarks",
            _encode(topic),
            partition,
            low,
            high,
        )

    # -- brokers ---------------------------------------------------------
    def broker_down(self, broker_id: int) -> None:
        """Disconnect every client of ``broker_id`` and refuse new connections.

        Partition leadership does not move: partitions it leads become
        unreachable until :meth:`broker_up` or :meth:`set_partition_leader`.
        New connections are refused (older librdkafka: accepted, then closed).
        """
        self._check(f"taking broker {broker_id} down", "rd_kafka_mock_broker_set_down", broker_id)

    def broker_up(self, broker_id: int) -> None:
        """Let ``broker_id`` accept connections again."""
        self._check(f"bringing broker {broker_id} up", "rd_kafka_mock_broker_set_up", broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of ``broker_id`` by ``rtt_ms`` milliseconds (0: none)."""
        self._check(
            f"setting the RTT of broker {broker_id}",
            "rd_kafka_mock_broker_set_rtt",
            broker_id,
            rtt_ms,
        )

    def set_rack(self, broker_id: int, rack: str) -> None:
        """Set the rack ``broker_id`` reports in Metadata."""
        self._check(
            f"setting the rack of broker {broker_id}",
            "rd_kafka_mock_broker_set_rack",
            broker_id,
            _encode(rack),
        )

    def set_broker_address(self, broker_id: int, host: str, port: int) -> None:
        """Make ``broker_id`` advertise ``host:port`` in Metadata.

        The broker keeps listening where it did (see :attr:`listeners`); use
        this to route clients through a proxy. :attr:`bootstrap` is unchanged.
        """
        self._call("rd_kafka_mock_broker_set_host_port", broker_id, _encode(host), port)

    def add_broker(self, broker_id: int) -> None:
        """Add a broker with id ``broker_id`` to the cluster (librdkafka >= 2.9).

        It listens on a new port and is not part of :attr:`bootstrap`.
        """
        self._check(f"adding broker {broker_id}", "rd_kafka_mock_broker_add", broker_id)

    def decommission_broker(self, broker_id: int) -> None:
        """Remove ``broker_id``; its partitions move to the other brokers (librdkafka >= 2.9)."""
        self._check(
            f"decommissioning broker {broker_id}",
            "rd_kafka_mock_broker_decommission",
            broker_id,
        )

    def set_controller(self, broker_id: int) -> None:
        """Make ``broker_id`` the controller reported in Metadata (-1: none)."""
        self._call("rd_kafka_mock_set_controller_id", broker_id)

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """Make ``broker_id`` the coordinator of a group or transactional id.

        Args:
            key_type: ``"group"`` or ``"transaction"``.
            key: the group id or transactional id.
            broker_id: the coordinator; it need not be an existing broker.
        """
        if key_type not in _COORDINATOR_TYPES:
            raise ValueError(f"key_type must be 'group' or 'transaction', not {key_type!r}")
        self._check(
            f"setting the {key_type} coordinator of {key!r}",
            "rd_kafka_mock_coordinator_set",
            _encode(key_type),
            _encode(key),
            broker_id,
        )

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Limit the versions of ``api_key`` that ApiVersions advertises.

        ``-1, -1`` disables the API. ``max_version`` must not exceed what the
        mock implements.
        """
        self._check(
            f"setting the versions of API {api_key}",
            "rd_kafka_mock_set_apiversion",
            api_key,
            min_version,
            max_version,
        )

    def set_telemetry(self, metrics: Sequence[str], push_interval_ms: int | None = None) -> None:
        """Set the client-metrics subscription (KIP-714) the brokers hand every client.

        ``metrics`` are the requested name prefixes (empty: none, ``""``:
        all); ``push_interval_ms`` the push interval (None: left as it is).
        """
        encoded = [_encode(m) for m in metrics]
        array = (_c_str * max(1, len(encoded)))(*encoded)
        self._check(
            "setting the telemetry subscription",
            "rd_kafka_mock_telemetry_set_requested_metrics",
            array,
            len(encoded),
        )
        if push_interval_ms is not None:
            self._check(
                "setting the telemetry push interval",
                "rd_kafka_mock_telemetry_set_push_interval",
                push_interval_ms,
            )

    def set_group_initial_rebalance_delay(self, delay_ms: int) -> None:
        """Set the brokers' ``group.initial.rebalance.delay.ms``."""
        self._call("rd_kafka_mock_group_initial_rebalance_delay_ms", delay_ms)

    # -- injected errors -------------------------------------------------
    def push_request_errors(self, api_key: int, *errors: ErrorCode) -> None:
        """Fail the next requests with ``api_key``, on any broker, with ``errors``.

        The next ``len(errors)`` matching requests get the codes in order,
        then requests succeed again. 0 lets a request through; librdkafka's
        ``_TRANSPORT`` (-195) makes the broker drop the connection instead.
        Errors pushed with :meth:`broker_push_request_error_rtts` come first.
        """
        codes = [_error_code(e) for e in errors]
        if not codes:
            return
        lib = self._library()
        if lib.has("rd_kafka_mock_push_request_errors_array"):
            array = (_c_int * len(codes))(*codes)
            self._call("rd_kafka_mock_push_request_errors_array", api_key, len(codes), array)
            return
        for start in range(0, len(codes), _VARARG_CHUNK):
            chunk = codes[start : start + _VARARG_CHUNK]
            self._call(
                "rd_kafka_mock_push_request_errors",
                api_key,
                len(chunk),
                *(_c_int(c) for c in chunk),
            )

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still pushed for ``api_key`` by :meth:`push_request_errors`."""
        self._call("rd_kafka_mock_clear_request_errors", api_key)

    def broker_push_request_error_rtts(
        self,
        broker_id: int,
        api_key: int,
        errors: Iterable[tuple[ErrorCode, int]],
    ) -> None:
        """Answer the next ``api_key`` requests to ``broker_id`` with errors and delays.

        Args:
            broker_id: the broker (a real id, not :data:`ALL_BROKERS`).
            api_key: the Kafka API key.
            errors: ``(error_code, rtt_ms)`` pairs, one per request, in order;
                error 0 with an RTT only delays the response.

        Raises:
            MockClusterError: e.g. an unknown broker.
        """
        pairs = [(_error_code(e), int(rtt)) for e, rtt in errors]
        for start in range(0, len(pairs), _VARARG_CHUNK):
            chunk = pairs[start : start + _VARARG_CHUNK]
            args: list[Any] = []
            for code, rtt in chunk:
                args += [_c_int(code), _c_int(rtt)]
            self._check(
                f"pushing errors for API {api_key} on broker {broker_id}",
                "rd_kafka_mock_broker_push_request_error_rtts",
                broker_id,
                api_key,
                len(chunk),
                *args,
            )

    def broker_error_count(self, broker_id: int, api_key: int) -> int:
        """How many errors pushed for ``broker_id`` and ``api_key`` are still waiting."""
        count = _c_size(0)
        self._check(
            f"counting the errors of broker {broker_id}",
            "rd_kafka_mock_broker_error_stack_cnt",
            broker_id,
            api_key,
            ctypes.byref(count),
        )
        return count.value

    # -- request tracking ------------------------------------------------
    def start_request_tracking(self) -> None:
        """Start recording every request the brokers receive (see :meth:`get_requests`)."""
        self._call("rd_kafka_mock_start_request_tracking")

    def stop_request_tracking(self) -> None:
        """Stop recording requests; what was recorded stays until :meth:`clear_requests`."""
        self._call("rd_kafka_mock_stop_request_tracking")

    def clear_requests(self) -> None:
        """Forget the requests recorded so far."""
        self._call("rd_kafka_mock_clear_requests")

    def get_requests(self) -> list[MockRequest]:
        """The requests recorded since tracking started or was last cleared, oldest first."""
        lib = self._library()
        count = _c_size(0)
        array = self._call("rd_kafka_mock_get_requests", ctypes.byref(count))
        if not array:
            return []
        n = count.value
        try:
            return [
                MockRequest(
                    int(lib.call("rd_kafka_mock_request_id", array[i])),
                    int(lib.call("rd_kafka_mock_request_api_key", array[i])),
                    int(lib.call("rd_kafka_mock_request_timestamp", array[i])),
                )
                for i in range(n)
            ]
        finally:
            if lib.has("rd_kafka_mock_request_destroy_array"):
                lib.call("rd_kafka_mock_request_destroy_array", array, n)
            else:
                for i in range(n):
                    lib.call("rd_kafka_mock_request_destroy", array[i])
                lib.call("rd_kafka_mem_free", None, ctypes.cast(array, _c_ptr))

    def count_requests(self, api_key: int | None = None, broker_id: int | None = None) -> int:
        """How many recorded requests match ``api_key`` and ``broker_id`` (None: any)."""
        return sum(
            1
            for r in self.get_requests()
            if (api_key is None or r.api_key == api_key)
            and (broker_id is None or r.broker_id == broker_id)
        )
