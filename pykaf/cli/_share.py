"""``pykaf share``: consume as a share group member; list, describe and delete share groups."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from pykaf import errors
from pykaf._output import print_table
from pykaf.cli._common import add_connection, client_settings, plural, print_json, settings
from pykaf.cli._console import write_record


def add_share(sub: Any) -> None:
    """The ``share`` subcommand and its actions."""
    s = sub.add_parser(
        "share",
        help="share groups (KIP-932): consume as a queue; list, describe, delete, offsets",
    )
    actions = s.add_subparsers(dest="action", required=True, metavar="ACTION")
    consume = actions.add_parser(
        "consume",
        help="print records a share group hands out (each accepted once printed)",
        description="Join share group GROUP and print the records it hands out; each is "
        "accepted once printed (--release/--reject: settle them so instead).",
    )
    consume.add_argument("topic")
    consume.add_argument("-g", "--group", required=True, help="the share group")
    consume.add_argument(
        "--from",
        dest="start",
        choices=["beginning", "end"],
        help="where a new group starts reading: sets its share.auto.offset.reset config "
        "(earliest or latest); a group that exists keeps its own (default: the group's "
        "config, which is latest unless set: pykaf groups config)",
    )
    consume.add_argument("-n", "--max-messages", type=int, help="stop after this many records")
    consume.add_argument(
        "-t", "--timeout", type=float, help="stop when no record came for this many seconds"
    )
    settle = consume.add_mutually_exclusive_group()
    settle.add_argument(
        "--release", action="store_true", help="release each record (delivered again) instead"
    )
    settle.add_argument(
        "--reject", action="store_true", help="reject each record (archived) instead"
    )
    consume.add_argument(
        "--format",
        choices=["value", "json"],
        default="value",
        help="value: each value on a line; json: one JSON object per record",
    )
    ls = actions.add_parser("list", help="every share group")
    describe = actions.add_parser("describe", help="state, epochs, members and assignments")
    describe.add_argument("group")
    offsets = actions.add_parser("offsets", help="start offset and lag per partition")
    offsets.add_argument("group")
    delete = actions.add_parser("delete", help="delete share groups (no members)")
    delete.add_argument("groups", nargs="+")
    for p in (consume, ls, describe, offsets, delete):
        add_connection(p)
    for p in (ls, describe, offsets, delete):
        p.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(run=run_share)


def run_share(args: argparse.Namespace) -> int:
    """Carry out one ``share`` action."""
    if args.action == "consume":
        return _consume(args)
    import pykaf.sync

    with pykaf.sync.Admin(args.bootstrap_servers, **settings(args)) as admin:
        if args.action == "list":
            groups = admin.list_share_groups()
            if args.json:
                print_json([dataclasses.asdict(g) for g in groups])
            else:
                print_table(["group", "state"], [(g.group_id, g.state) for g in groups])
        elif args.action == "describe":
            d = admin.describe_share_group(args.group)
            if args.json:
                print_json(dataclasses.asdict(d))
            else:
                print(f"share group {d.group_id}: {d.state} (assignor {d.protocol})")
                print(f"group epoch {d.group_epoch}, assignment epoch {d.assignment_epoch}")
                print_table(
                    ["member", "epoch", "client", "host", "assignment"],
                    [
                        (
                            m.member_id,
                            m.member_epoch,
                            m.client_id,
                            m.client_host,
                            _assignment(m.assignment),
                        )
                        for m in d.members
                    ],
                )
        elif args.action == "offsets":
            found = admin.list_share_group_offsets(args.group)
            rows = sorted(found.items())
            if args.json:
                print_json(
                    [{"topic": t, "partition": p, **dataclasses.asdict(o)} for (t, p), o in rows]
                )
            else:
                print_table(
                    ["topic", "partition", "start offset", "lag"],
                    [(t, p, o.start_offset, "-" if o.lag < 0 else o.lag) for (t, p), o in rows],
                )
        else:
            admin.delete_groups(args.groups)
            if args.json:
                print_json({"deleted": args.groups})
            else:
                print(f"deleted {' '.join(args.groups)}")
    return 0


def _assignment(assignment: dict[str, list[int]]) -> str:
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "-"


def _consume(args: argparse.Namespace) -> int:
    import pykaf
    import pykaf.sync

    outcome = pykaf.RELEASE if args.release else pykaf.REJECT if args.reject else None
    if args.start is not None:
        _start_at(args)
    out = sys.stdout.buffer
    count = 0
    interrupted = False
    consumer = pykaf.sync.ShareConsumer(
        args.bootstrap_servers, args.group, [args.topic], **settings(args)
    )
    try:
        while args.max_messages is None or count < args.max_messages:
            record = consumer.poll(timeout=args.timeout)
            if record is None:
                break
            write_record(out, record, args.format)
            if outcome is not None:
                consumer.acknowledge(record, outcome)
            count += 1
    except KeyboardInterrupt:
        interrupted = True
    finally:
        try:
            out.flush()
        finally:
            consumer.close()  # accepts what was printed, releases what was not
    print(f"consumed {plural(count, 'record')}", file=sys.stderr)
    return 130 if interrupted else 0


#: The group config ``share consume --from`` sets, and its value for each choice.
RESET = "share.auto.offset.reset"
RESETS = {"beginning": "earliest", "end": "latest"}


def _start_at(args: argparse.Namespace) -> None:
    """``--from``: where a new share group starts, as its ``share.auto.offset.reset``.

    A group that does not exist yet gets the config (incrementalAlterConfigs
    on the group resource) before it is joined. One that exists keeps its own:
    its members may be reading with it. When that differs from ``--from``, a
    warning on stderr says so and how to change it.
    """
    import pykaf.sync

    reset = RESETS[args.start]
    with pykaf.sync.Admin(args.bootstrap_servers, **client_settings(args)) as admin:
        try:
            admin.describe_share_group(args.group)
        except errors.GroupIdNotFoundError:
            admin.alter_group_configs({args.group: {RESET: reset}})
            return
        entries = admin.describe_group_configs([args.group], keys=[RESET])[args.group]
    own = entries[RESET].value if RESET in entries else None
    if own != reset:
        print(
            f"pykaf: share group {args.group!r} exists: its {RESET} stays {own} "
            f"(--from is for a new group; pykaf groups config {args.group} "
            f"--set {RESET}={reset} changes it)",
            file=sys.stderr,
        )
