"""Conformance cases of KIP-227 fetch sessions: opened, incremental, forgotten, errors, closed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance_harness import Answers, Target, Wire, case, norm
from conformance_util import batch, produce

from pykaf import protocol as P

F = P.FetchRequest


def session_fetch(
    session_id: int,
    epoch: int,
    parts: list[tuple[str, int, int]],
    forgotten: Sequence[tuple[str, int]] = (),
) -> P.FetchRequest:
    """A Fetch that does not wait, with session fields, (topic, partition, offset) and forgotten."""
    topics: dict[str, list[Any]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(
            F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)
        )
    gone: dict[str, list[int]] = {}
    for topic, partition in forgotten:
        gone.setdefault(topic, []).append(partition)
    return F(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[F.ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()],
        rack_id="",
    )


@case()
async def case_fetch_sessions(t: Target, w: Wire, out: Answers) -> None:
    """A full fetch opens a session; incremental fetches answer what changed; errors; close."""
    topic = await t.create_topic("fetch_sessions", 3)
    await w.send(produce(topic, batch([b"a", b"b"]), 0))
    await w.send(produce(topic, batch([b"c"]), 1))

    first = await w.send(session_fetch(0, 0, [(topic, 0, 0), (topic, 1, 0)]))
    session = first.session_id
    out.add("full fetch opens a session", norm(first))
    out.add("a session id is given", session != 0)

    # Positions moved past what came back, and partition 2 joins the session.
    moved = session_fetch(session, 1, [(topic, 0, 2), (topic, 1, 1), (topic, 2, 0)])
    out.add("incremental: moved positions and an added partition", norm(await w.send(moved)))

    await w.send(produce(topic, batch([b"d"]), 1))
    out.add(
        "incremental naming nothing: new records", norm(await w.send(session_fetch(session, 2, [])))
    )

    await w.send(produce(topic, batch([b"e"]), 0))
    forget = session_fetch(session, 3, [(topic, 1, 2)], forgotten=[(topic, 0)])
    out.add("incremental: partition 0 forgotten", norm(await w.send(forget)))
    out.add("incremental: nothing new", norm(await w.send(session_fetch(session, 4, []))))

    out.add("a stale epoch", norm(await w.send(session_fetch(session, 3, []))))
    out.add("the session survives a stale epoch", norm(await w.send(session_fetch(session, 5, []))))
    unknown = session + 1 if session < 2**31 - 1 else 1
    out.add("an unknown session id", norm(await w.send(session_fetch(unknown, 1, []))))

    # A full fetch naming the session replaces it with a new one.
    again = await w.send(session_fetch(session, 0, [(topic, 0, 0)]))
    out.add("a full fetch replacing the session", norm(again))
    out.add("the old session is gone", norm(await w.send(session_fetch(session, 6, []))))
    session = again.session_id
    out.add("the replacement has another id", session not in (0, first.session_id))

    closed = await w.send(session_fetch(session, -1, [(topic, 1, 0)]))
    out.add("epoch -1 closes the session: sessionless answer", norm(closed))
    out.add("the closed session is gone", norm(await w.send(session_fetch(session, 1, []))))
    empty = await w.send(session_fetch(0, 0, []))
    out.add("a full fetch of no partitions opens a session", norm(empty))
    out.add(
        "an incremental fetch leaving it empty: sessionless answer",
        norm(await w.send(session_fetch(empty.session_id, 1, []))),
    )
    out.add(
        "the empty session is gone",
        norm(await w.send(session_fetch(empty.session_id, 2, []))),
    )
    out.add(
        "sessionless full fetch",
        norm(await w.send(session_fetch(0, -1, [(topic, 0, 3), (topic, 2, 0)]))),
    )
