"""``pykaf topics`` and ``pykaf groups``: the admin client from the shell."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from pykaf import errors
from pykaf._admin.results import ConfigChange, ConfigValue, GroupDescription
from pykaf._cluster.client import NEWEST, OLDEST
from pykaf._output import print_table
from pykaf.cli._common import (
    CliError,
    add_connection,
    pairs,
    plural,
    print_json,
    settings,
)


def add_topics(sub: Any) -> None:
    """The ``topics`` subcommand and its actions."""
    t = sub.add_parser(
        "topics", help="list, describe, create, delete topics; show and alter configs"
    )
    actions = t.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("list", help="topic names")
    ls.add_argument("--internal", action="store_true", help="include internal topics")
    describe = actions.add_parser("describe", help="partitions, leaders and replicas")
    describe.add_argument("topics", nargs="+")
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("-p", "--partitions", type=int, default=-1, help="default: the broker's")
    create.add_argument("-r", "--replication-factor", type=int, default=-1)
    create.add_argument("-c", "--config", action="append", default=[], metavar="NAME=VALUE")
    delete = actions.add_parser("delete", help="delete topics")
    delete.add_argument("topics", nargs="+")
    configs = actions.add_parser("configs", help="a topic's configs with their sources")
    configs.add_argument("topic")
    configs.add_argument("--all", action="store_true", help="defaults too, not only what is set")
    alter = actions.add_parser("alter", help="change a topic's configs (only those named)")
    alter.add_argument("topic")
    alter.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    alter.add_argument(
        "--delete", action="append", default=[], metavar="NAME", help="back to the default"
    )
    alter.add_argument(
        "--append", action="append", default=[], metavar="NAME=VALUE", help="add to a list config"
    )
    alter.add_argument(
        "--subtract",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="remove from a list config",
    )
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")
    for p in (ls, describe, create, delete, configs, alter):
        add_connection(p)
        p.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(run=run_topics)


def run_topics(args: argparse.Namespace) -> int:
    """Carry out one ``topics`` action."""
    import pykaf.sync

    configs = pairs(args.config, "--config") if args.action == "create" else {}
    with pykaf.sync.Admin(args.bootstrap_servers, **settings(args)) as admin:
        if args.action == "list":
            names = admin.list_topics(internal=args.internal)
            if args.json:
                print_json(names)
            else:
                print("\n".join(names))
        elif args.action == "describe":
            described = admin.describe_topics(args.topics)
            if args.json:
                print_json({n: dataclasses.asdict(d) for n, d in described.items()})
            else:
                rows = [
                    (d.name, p.partition, p.leader, _ids(p.replicas), _ids(p.isr))
                    for d in described.values()
                    for p in d.partitions
                ]
                print_table(["topic", "partition", "leader", "replicas", "isr"], rows)
        elif args.action == "create":
            admin.create_topic(args.topic, args.partitions, args.replication_factor, configs)
            _done(args, {"created": args.topic})
        elif args.action == "configs":
            entries = admin.describe_topic_configs([args.topic])[args.topic]
            shown = [e for _, e in sorted(entries.items()) if args.all or not e.default]
            if args.json:
                print_json({e.name: dataclasses.asdict(e) for e in shown})
            else:
                print_table(
                    ["config", "value", "source"], [(e.name, e.value, e.source) for e in shown]
                )
        elif args.action == "alter":
            changes = _changes(args)
            admin.alter_topic_configs({args.topic: changes}, validate_only=args.validate_only)
            verb = "valid" if args.validate_only else "altered"
            _done(args, {verb: f"{args.topic} ({plural(len(changes), 'config')})"})
        else:
            admin.delete_topics(args.topics)
            _done(args, {"deleted": args.topics})
    return 0


def add_groups(sub: Any) -> None:
    """The ``groups`` subcommand and its actions."""
    g = sub.add_parser(
        "groups", help="list, describe and delete groups; lag; reset offsets; configs"
    )
    actions = g.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("list", help="every group")
    describe = actions.add_parser("describe", help="state and members with their assignments")
    describe.add_argument("group")
    lag = actions.add_parser("lag", help="committed offset, end and lag per partition")
    lag.add_argument("group")
    delete = actions.add_parser("delete", help="delete groups (and their offsets)")
    delete.add_argument("groups", nargs="+")
    reset = actions.add_parser("reset-offsets", help="set a group's offsets (no active members)")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    config = actions.add_parser(
        "config",
        help="a group's configs (Kafka 4.0+); --set or --delete change them",
        description="Show every config of GROUP with its source, or change the ones named. "
        "A group needs no members, nor to exist yet, to have configs.",
    )
    config.add_argument("group")
    config.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    config.add_argument(
        "--delete", action="append", default=[], metavar="NAME", help="back to the broker's value"
    )
    config.add_argument("--validate-only", action="store_true", help="check, change nothing")
    for p in (ls, describe, lag, delete, reset, config):
        add_connection(p)
        p.add_argument("--json", action="store_true", help="machine-readable output")
    g.set_defaults(run=run_groups)


def run_groups(args: argparse.Namespace) -> int:
    """Carry out one ``groups`` action."""
    import pykaf.sync

    with pykaf.sync.Admin(args.bootstrap_servers, **settings(args)) as admin:
        if args.action == "list":
            groups = admin.list_groups()
            if args.json:
                print_json([dataclasses.asdict(g) for g in groups])
            else:
                print_table(
                    ["group", "state", "protocol type"],
                    [(g.group_id, g.state, g.protocol_type) for g in groups],
                )
        elif args.action == "describe":
            d = admin.describe_group(args.group)
            _must_exist(d)
            if args.json:
                print_json(dataclasses.asdict(d))
            else:
                kind = " ".join(x for x in (d.protocol_type, d.protocol) if x)
                print(f"group {d.group_id}: {d.state}" + (f" ({kind})" if kind else ""))
                if d.group_protocol in ("consumer", "share"):
                    # KIP-848 and KIP-932: epochs, and where the coordinator is moving
                    # each member (a share group has no target)
                    print(f"group epoch {d.group_epoch}, assignment epoch {d.assignment_epoch}")
                    print_table(
                        ["member", "instance", "epoch", "client", "host", "assignment", "target"],
                        [
                            (
                                m.member_id,
                                m.group_instance_id or "-",
                                m.member_epoch,
                                m.client_id,
                                m.client_host,
                                _assignment(m.assignment),
                                _assignment(m.target_assignment or {}),
                            )
                            for m in d.members
                        ],
                    )
                else:
                    print_table(
                        ["member", "client", "host", "assignment"],
                        [
                            (m.member_id, m.client_id, m.client_host, _assignment(m.assignment))
                            for m in d.members
                        ],
                    )
        elif args.action == "lag":
            lags = admin.group_lag(args.group)
            if not lags:  # nothing committed: a group yet to commit, or none at all
                _must_exist(admin.describe_group(args.group))
            if args.json:
                print_json([dataclasses.asdict(x) for x in lags])
            else:
                # No commit yet: "-", not Kafka's -1 (the lag counts from the log start).
                print_table(
                    ["topic", "partition", "committed", "end", "lag"],
                    [
                        (
                            x.topic,
                            x.partition,
                            "-" if x.committed < 0 else x.committed,
                            x.end,
                            x.lag,
                        )
                        for x in lags
                    ],
                )
                print(f"total lag {sum(x.lag for x in lags)}")
        elif args.action == "delete":
            admin.delete_groups(args.groups)
            _done(args, {"deleted": args.groups})
        elif args.action == "config":
            _group_config(admin, args)
        else:
            parts = [p.partition for p in admin.describe_topic(args.topic).partitions]
            if args.to_offset is not None:
                offsets = {(args.topic, p): args.to_offset for p in parts}
            else:
                which = OLDEST if args.to_earliest else NEWEST
                offsets = admin.list_offsets({(args.topic, p): which for p in parts})
            admin.alter_group_offsets(args.group, offsets)
            if args.json:
                print_json(
                    {"group": args.group, "offsets": {str(p): o for (_, p), o in offsets.items()}}
                )
            else:
                print(f"group {args.group}: offsets of {args.topic} set")
                print_table(
                    ["partition", "offset"], [(p, o) for (_, p), o in sorted(offsets.items())]
                )
    return 0


def _group_config(admin: Any, args: argparse.Namespace) -> None:
    """``groups config``: change the configs named, or show them all."""
    if args.set or args.delete:
        changes = _changes(args)
        admin.alter_group_configs({args.group: changes}, validate_only=args.validate_only)
        verb = "valid" if args.validate_only else "altered"
        _done(args, {verb: f"group {args.group} ({plural(len(changes), 'config')})"})
        return
    if args.validate_only:
        raise CliError("--validate-only checks changes: give --set or --delete")
    entries = admin.describe_group_configs([args.group])[args.group]
    shown = [e for _, e in sorted(entries.items())]
    if args.json:
        print_json({e.name: dataclasses.asdict(e) for e in shown})
    else:
        print_table(["config", "value", "source"], [(e.name, e.value, e.source) for e in shown])


def _must_exist(group: GroupDescription) -> None:
    """Refuse a group that does not exist (DescribeGroups calls it "Dead").

    Raises:
        GroupIdNotFoundError: as ``share describe`` raises it (exit 1), where
            the admin client describes an empty "Dead" group.
    """
    if group.state == "Dead" and not group.members:
        raise errors.GroupIdNotFoundError(f"group {group.group_id!r} not found")


def _changes(args: argparse.Namespace) -> dict[str, ConfigValue]:
    """The ``topics alter`` (or ``groups config``) options as one change per config name.

    Repeated ``--append`` (or ``--subtract``) of one config add up; any other
    repeat is refused rather than one of its values silently winning.
    """
    changes: dict[str, ConfigValue] = {}
    listed: dict[str, tuple[str, list[str]]] = {}  # name -> (op, values)

    def take(name: str, change: ConfigValue) -> None:
        if name in changes:
            raise CliError(f"{name} is changed twice")
        changes[name] = change

    for item in args.set:
        take(*_pair(item, "--set"))
    for name in args.delete:
        take(name, None)
    lists = (("append", getattr(args, "append", [])), ("subtract", getattr(args, "subtract", [])))
    for op, items in lists:
        for item in items:
            name, value = _pair(item, f"--{op}")
            if (name in listed and listed[name][0] != op) or name in changes:
                raise CliError(f"{name} is changed twice")
            listed.setdefault(name, (op, []))[1].append(value)
    for name, (op, values) in listed.items():
        make = ConfigChange.append if op == "append" else ConfigChange.subtract
        try:
            changes[name] = make(*values)
        except ValueError as exc:
            raise CliError(f"--{op} {name}: {exc}") from None
    if not changes:
        raise CliError("nothing to change: give --set, --delete, --append or --subtract")
    return changes


def _pair(item: str, what: str) -> tuple[str, str]:
    ((name, value),) = pairs([item], what).items()
    return name, value


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _assignment(assignment: dict[str, list[int]]) -> str:
    return " ".join(f"{t}:{_ids(ps)}" for t, ps in sorted(assignment.items())) or "-"


def _done(args: argparse.Namespace, what: dict[str, Any]) -> None:
    if args.json:
        print_json(what)
    else:
        print(", ".join(f"{k} {v}" for k, v in what.items()))
