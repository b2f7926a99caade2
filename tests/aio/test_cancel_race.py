"""pykaf.aio's bridge: a call cancelled in the loop pass its trio function finishes in."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pykaf.aio import open_client
from pykaf.aio._bridge import call


async def _quick() -> int:
    return 1


def test_a_call_cancelled_as_its_trio_side_finishes_does_not_hang(fake_cluster: Any) -> None:
    async def main() -> int:
        async with open_client(fake_cluster.bootstrap) as client:
            runner = client._runner
            for _ in range(20):
                task = asyncio.create_task(call(runner, _quick))
                await asyncio.sleep(0)  # the task starts the trio call and awaits it
                task.cancel()  # the trio function ends in this same loop pass
                done, _ = await asyncio.wait([task], timeout=5)
                if not done:
                    return 1
                assert task.cancelled()
        return 0

    # In a thread of its own: before the fix the stuck call also hangs asyncio.run's shutdown.
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(asyncio.run(main())), daemon=True)
    thread.start()
    thread.join(60)
    assert results == [0]
