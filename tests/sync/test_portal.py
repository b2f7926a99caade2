"""The portal alone (no broker): calls into a trio loop in a thread from plain threads."""

from __future__ import annotations

import _thread
import concurrent.futures
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._sync.portal import Portal, get_portal, wait_future
from pykaf._util import open_service_nursery

ROOT = Path(pykaf.__file__).resolve().parent.parent


@pytest.fixture
def portal() -> Iterator[Portal]:
    p = Portal()
    yield p
    p.shutdown(timeout=2)


def run_script(script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter that has no event loop of its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


class Boom(Exception):
    pass


async def add(a: int, b: int) -> int:
    await trio.sleep(0)
    return a + b


def test_run_returns_the_result(portal: Portal) -> None:
    assert not portal.running
    assert portal.run(add, 2, 3) == 5
    assert portal.running


def test_run_sync_runs_in_the_loop_thread(portal: Portal) -> None:
    def where() -> tuple[int, bool]:
        return threading.get_ident(), portal.in_loop_thread()

    ident, inside = portal.run_sync(where)
    assert inside and ident != threading.get_ident()
    assert not portal.in_loop_thread()


@pytest.mark.parametrize("exc", [Boom("x"), ValueError("v"), errors.RecordTooLargeError("big")])
def test_exceptions_propagate_with_their_type(portal: Portal, exc: Exception) -> None:
    async def fail() -> None:
        await trio.sleep(0)
        raise exc

    with pytest.raises(type(exc)) as info:
        portal.run(fail)
    assert info.value is exc
    with pytest.raises(type(exc)):
        portal.run_sync(lambda: (_ for _ in ()).throw(exc))
    assert portal.run(add, 1, 1) == 2  # the loop survived


def test_timeout_cancels_the_call_in_the_loop(portal: Portal) -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise

    with pytest.raises(errors.KafkaTimeoutError, match=r"slow did not finish within 0\.1 s"):
        portal.run(slow, timeout=0.1)
    assert cancelled.wait(5)
    assert portal.run(add, 1, 2, timeout=10) == 3


def test_timeout_when_the_loop_itself_is_blocked(portal: Portal) -> None:
    release = threading.Event()
    portal.run(add, 0, 0)
    blocker = threading.Thread(target=portal.run_sync, args=(release.wait,))
    blocker.start()
    try:
        with pytest.raises(errors.KafkaTimeoutError):
            portal.run(add, 1, 2, timeout=0.1)
    finally:
        release.set()
        blocker.join()
    assert portal.run(add, 1, 2) == 3


def test_calls_from_many_threads(portal: Portal) -> None:
    async def echo(i: int) -> tuple[int, int]:
        await trio.sleep(0.001 * (i % 3))
        return i, threading.get_ident()

    def worker(base: int) -> list[tuple[int, int]]:
        return [portal.run(echo, base + i) for i in range(50)]

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(worker, range(0, 1600, 100)))
    loop_threads = {ident for batch in results for _, ident in batch}
    assert len(loop_threads) == 1 and threading.get_ident() not in loop_threads
    for base, batch in zip(range(0, 1600, 100), results, strict=True):
        assert [i for i, _ in batch] == list(range(base, base + 50))


def test_run_from_the_loop_thread_raises(portal: Portal) -> None:
    def reenter() -> int:
        return portal.run(add, 1, 2)

    with pytest.raises(RuntimeError, match="own event loop thread"):
        portal.run_sync(reenter)

    # The usual way to get there by accident: a done-callback of a future the
    # loop resolves, calling back into the blocking API.
    seen: list[BaseException] = []
    future: concurrent.futures.Future[int] = concurrent.futures.Future()

    def callback(_: concurrent.futures.Future[int]) -> None:
        try:
            portal.run(add, 1, 2)
        except RuntimeError as exc:
            seen.append(exc)

    future.add_done_callback(callback)
    portal.run_sync(future.set_result, 1)
    assert len(seen) == 1
    assert portal.run(add, 2, 2) == 4


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.exit_exc: BaseException | None = None

    @asynccontextmanager
    async def open(
        self, value: str, *, fail_enter: bool = False, suppress: bool = False
    ) -> AsyncIterator[str]:
        async def background() -> None:
            try:
                await trio.sleep_forever()
            finally:
                self.events.append("background stopped")

        async with open_service_nursery() as nursery:  # unwraps single errors
            nursery.start_soon(background)
            self.events.append("entered")
            if fail_enter:
                raise Boom("enter")
            try:
                yield value
            except BaseException as exc:
                self.exit_exc = exc
                self.events.append(f"exit with {type(exc).__name__}")
                if not suppress:
                    raise
            else:
                self.events.append("exit")
            finally:
                nursery.cancel_scope.cancel()


def test_context_lifecycle(portal: Portal) -> None:
    rec = Recorder()
    value, handle = portal.start_context(rec.open, "v")
    assert value == "v" and rec.events == ["entered"] and not handle.done
    # The context's nursery runs in the loop while the caller does other things.
    assert portal.run(add, 1, 1) == 2
    assert rec.events == ["entered"]
    assert handle.exit() is False
    assert handle.done
    assert rec.events == ["entered", "exit", "background stopped"]
    assert handle.exit() is False  # again: same answer, nothing runs twice
    assert rec.events.count("exit") == 1


def test_context_exception_passed_to_exit(portal: Portal) -> None:
    rec = Recorder()
    _, handle = portal.start_context(rec.open, "v")
    err = Boom("in the block")
    assert handle.exit(err) is False  # re-raised by the context: not suppressed
    assert rec.exit_exc is err

    rec2 = Recorder()
    _, handle2 = portal.start_context(partial(rec2.open, suppress=True), "v")
    assert handle2.exit(Boom("b")) is True


def test_context_enter_error_propagates(portal: Portal) -> None:
    rec = Recorder()
    with pytest.raises(Boom, match="enter"):
        portal.start_context(partial(rec.open, fail_enter=True), "v")
    assert "background stopped" in rec.events
    assert portal.run(add, 1, 1) == 2


def test_context_exit_error_propagates(portal: Portal) -> None:
    @asynccontextmanager
    async def bad_exit() -> AsyncIterator[None]:
        yield
        raise Boom("on exit")

    _, handle = portal.start_context(bad_exit)
    with pytest.raises(Boom, match="on exit"):
        handle.exit()
    with pytest.raises(Boom, match="on exit"):
        handle.exit()


def test_context_whose_background_task_crashes(portal: Portal) -> None:
    crash = trio.Event()

    @asynccontextmanager
    async def fragile() -> AsyncIterator[str]:
        async def background() -> None:
            await crash.wait()
            raise Boom("background")

        async with open_service_nursery() as nursery:
            nursery.start_soon(background)
            yield "ok"

    value, handle = portal.start_context(fragile)
    assert value == "ok"
    portal.run_sync(crash.set)
    with pytest.raises(Boom, match="background"):
        handle.exit()
    assert portal.run(add, 1, 1) == 2  # the portal did not go down with it


def test_context_exit_timeout_abandons_it(portal: Portal) -> None:
    cancelled = threading.Event()

    @asynccontextmanager
    async def slow_exit() -> AsyncIterator[None]:
        yield
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise

    _, handle = portal.start_context(slow_exit)
    with pytest.raises(errors.KafkaTimeoutError):
        handle.exit(timeout=0.1)
    assert cancelled.wait(5)
    with pytest.raises(errors.ClosedError, match="abandoned"):
        handle.exit()


def test_context_enter_timeout(portal: Portal) -> None:
    @asynccontextmanager
    async def slow_enter() -> AsyncIterator[None]:
        await trio.sleep_forever()
        yield

    with pytest.raises(errors.KafkaTimeoutError):
        portal.start_context(slow_enter, timeout=0.1)
    assert portal.run(add, 1, 1) == 2


def test_wait_future() -> None:
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    threading.Timer(0.05, future.set_result, (7,)).start()
    assert wait_future(future) == 7
    pending: concurrent.futures.Future[int] = concurrent.futures.Future()
    with pytest.raises(errors.KafkaTimeoutError):
        wait_future(pending, timeout=0.05)
    assert pending.cancelled()
    failing: concurrent.futures.Future[int] = concurrent.futures.Future()
    failing.set_exception(Boom("f"))
    with pytest.raises(Boom):
        wait_future(failing)


def test_shutdown_fails_calls_and_is_final(portal: Portal) -> None:
    started = threading.Event()
    outcome: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await trio.sleep_forever()

    def call() -> None:
        try:
            portal.run(forever)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert started.wait(5)
    portal.shutdown(timeout=1)
    caller.join(10)
    assert not caller.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], errors.ClosedError)
    assert portal.closed
    with pytest.raises(errors.ClosedError):
        portal.run(add, 1, 1)
    portal.shutdown()  # idempotent


def test_shared_portal_is_replaced_after_shutdown() -> None:
    shared = get_portal()
    assert get_portal() is shared
    assert shared.run(add, 1, 1) == 2
    shared.shutdown(timeout=1)
    fresh = get_portal()
    assert fresh is not shared and fresh.run(add, 2, 2) == 4


def _main_thread_only() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt goes to the main thread; tests run elsewhere")


@pytest.mark.parametrize("how", ["interrupt_main", "pthread_kill"])
def test_keyboard_interrupt_stops_a_blocked_run(portal: Portal, how: str) -> None:
    _main_thread_only()
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not handled by Python's default handler here")
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise

    main = threading.main_thread().ident
    assert main is not None

    def interrupt() -> None:
        started.wait(10)
        if how == "interrupt_main":
            _thread.interrupt_main()
        else:
            signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Thread(target=interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            portal.run(forever)
    finally:
        timer.join()
    assert cancelled.wait(5)
    assert portal.run(add, 1, 1) == 2


def test_ctrl_c_in_a_script() -> None:
    # The script takes Ctrl-C even when pytest runs in the background of a
    # shell without job control, which starts it (and so this child) with
    # SIGINT ignored.
    script = """
        import signal, sys, threading, trio
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from pykaf._sync.portal import get_portal

        cancelled = threading.Event()

        async def forever():
            print("blocked", flush=True)
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                cancelled.set()
                raise

        try:
            get_portal().run(forever)
        except KeyboardInterrupt:
            print("interrupted", cancelled.wait(5), flush=True)
            sys.exit(0)
        sys.exit(3)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "blocked"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == "interrupted True"


def test_fork_gives_the_child_its_own_portal() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no os.fork here")
    script = """
        import os, sys, trio
        from pykaf._sync.portal import get_portal

        async def pid():
            await trio.sleep(0)
            return os.getpid()

        parent = get_portal()
        assert parent.run(pid) == os.getpid()
        child = os.fork()
        if child == 0:
            code = 0
            try:
                try:
                    parent.run(pid)
                    code = 10
                except RuntimeError as exc:
                    if "os.fork()" not in str(exc):
                        code = 11
                mine = get_portal()
                if mine is parent or mine.run(pid) != os.getpid():
                    code = 12
                mine.shutdown()
            except BaseException as exc:
                print("child failed:", repr(exc), flush=True)
                code = 13
            os._exit(code)
        _, status = os.waitpid(child, 0)
        assert parent.run(pid) == os.getpid()
        print("child exit", os.waitstatus_to_exitcode(status), flush=True)
    """
    result = run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "child exit 0", result.stdout


def test_exit_closes_open_contexts_normally() -> None:
    script = """
        from contextlib import asynccontextmanager
        import trio
        from pykaf._sync.portal import get_portal

        @asynccontextmanager
        async def resource():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.sleep_forever)
                yield "r"
                await trio.sleep(0.01)  # like a flush: takes a moment, in the loop
                print("closed normally", flush=True)
                nursery.cancel_scope.cancel()

        value, _ = get_portal().start_context(resource)
        print("opened", value, flush=True)
        # No exit: the script ends with the context open.
    """
    result = run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["opened r", "closed normally"]


def test_exit_does_not_hang_on_stuck_tasks() -> None:
    script = """
        import threading, time, trio
        from contextlib import asynccontextmanager
        import pykaf._sync.portal as portal_module
        from pykaf import errors

        portal_module.EXIT_GRACE = 0.2
        portal = portal_module.get_portal()

        async def shielded():
            with trio.CancelScope(shield=True):
                await trio.sleep_forever()

        @asynccontextmanager
        async def never_closes():
            yield
            with trio.CancelScope(shield=True):
                await trio.sleep_forever()

        portal.start_context(never_closes)
        threading.Thread(target=portal.run, args=(shielded,), daemon=True).start()
        try:
            portal.run_sync(time.sleep, 3600, timeout=0.2)  # blocks the loop itself
        except errors.KafkaTimeoutError:
            print("timed out", flush=True)
    """
    result = run_script(script, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "timed out"
