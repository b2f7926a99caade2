"""pykaf.sync inside a running asyncio loop: a warning that names pykaf.aio, once per process.

Not an error: Jupyter runs every cell inside a running loop. Each case runs
in a fresh interpreter, whose once-per-process state is its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pykaf

ROOT = Path(pykaf.__file__).resolve().parent.parent

SCRIPT = """
import asyncio, sys, warnings
import pykaf.sync

warnings.simplefilter("always")  # so that "once" is pykaf's doing, not the filter's
bootstrap = sys.argv[1]

def list_topics():
    with pykaf.sync.Admin(bootstrap) as admin:
        admin.list_topics()

{body}
"""


def run_script(body: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = textwrap.dedent(SCRIPT).format(body=textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, "-c", script, bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "RuntimeWarning" in line]


def test_a_blocking_call_in_a_running_loop_warns_once_naming_pykaf_aio(fake_cluster: Any) -> None:
    body = """
    async def main():
        list_topics()   # the caller's own line is named
        list_topics()
    asyncio.run(main())
    asyncio.run(main())
    """
    done = run_script(body, fake_cluster.bootstrap)
    assert done.returncode == 0, done.stderr
    found = warnings_in(done.stderr)
    assert len(found) == 1, done.stderr
    assert "pykaf.aio" in found[0] and "blocks the running asyncio loop" in found[0]
    assert "<string>" in found[0]  # pointed at the script, not at pykaf's insides


def test_no_warning_outside_a_loop(fake_cluster: Any) -> None:
    done = run_script("list_topics()\nlist_topics()\n", fake_cluster.bootstrap)
    assert done.returncode == 0, done.stderr
    assert warnings_in(done.stderr) == []
