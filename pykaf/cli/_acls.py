"""``pykaf acls``: list, create and delete ACL bindings from the shell."""

from __future__ import annotations

import argparse
from typing import Any

from pykaf._admin.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    code_name,
)
from pykaf._output import print_table
from pykaf.cli._common import CliError, add_connection, print_json, settings


def _choice(enum: Any, text: str) -> Any:
    try:
        return enum[text.upper().replace("-", "_")]
    except KeyError:
        names = ", ".join(m.name.lower().replace("_", "-") for m in enum)
        raise CliError(f"{text!r} is not one of {names}") from None


def add_acls(sub: Any) -> None:
    """The ``acls`` subcommand and its actions."""
    a = sub.add_parser("acls", help="list, create and delete ACL bindings")
    actions = a.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("list", help="the bindings matching the options (all by default)")
    create = actions.add_parser("create", help="add one binding")
    delete = actions.add_parser("delete", help="delete the bindings matching the options")
    for p in (ls, create, delete):
        making = p is create
        p.add_argument(
            "--resource-type",
            required=making,
            help="topic, group, cluster, transactional-id, delegation-token, user",
        )
        p.add_argument("--name", required=making, help="the resource name ('*': all)")
        p.add_argument(
            "--pattern",
            default="literal" if making else "any",
            help="literal or prefixed; filters also any or match",
        )
        p.add_argument("--principal", required=making, help="e.g. User:alice")
        p.add_argument("--host", default="*" if making else None)
        p.add_argument("--operation", required=making, help="read, write, describe, all, ...")
        p.add_argument(
            "--permission",
            default="allow" if making else "any",
            help="allow or deny" + ("" if making else "; filters also any"),
        )
        add_connection(p)
        p.add_argument("--json", action="store_true", help="machine-readable output")
    delete.add_argument(
        "--all", action="store_true", help="with no filter option: delete every binding"
    )
    a.set_defaults(run=run_acls)


def _binding(args: argparse.Namespace) -> AclBinding:
    try:
        return AclBinding(
            resource_type=_choice(ResourceType, args.resource_type),
            name=args.name,
            principal=args.principal,
            operation=_choice(AclOperation, args.operation),
            permission=_choice(AclPermission, args.permission),
            host=args.host,
            pattern_type=_choice(PatternType, args.pattern),
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _filter(args: argparse.Namespace) -> AclFilter:
    return AclFilter(
        resource_type=_choice(ResourceType, args.resource_type or "any"),
        name=args.name,
        pattern_type=_choice(PatternType, args.pattern),
        principal=args.principal,
        host=args.host,
        operation=_choice(AclOperation, args.operation or "any"),
        permission=_choice(AclPermission, args.permission),
    )


def _show(args: argparse.Namespace, bindings: list[AclBinding]) -> None:
    if args.json:
        print_json(
            [
                {
                    "resource_type": code_name(b.resource_type),
                    "name": b.name,
                    "pattern_type": code_name(b.pattern_type),
                    "principal": b.principal,
                    "host": b.host,
                    "operation": code_name(b.operation),
                    "permission": code_name(b.permission),
                }
                for b in bindings
            ]
        )
        return
    rows = [
        (
            code_name(b.resource_type),
            b.name,
            code_name(b.pattern_type),
            b.principal,
            b.host,
            code_name(b.operation),
            code_name(b.permission),
        )
        for b in bindings
    ]
    headers = ["resource", "name", "pattern", "principal", "host", "operation", "permission"]
    print_table(headers, rows)


def run_acls(args: argparse.Namespace) -> int:
    """Carry out one ``acls`` action."""
    import pykaf.sync

    request = _binding(args) if args.action == "create" else _filter(args)
    if args.action == "delete" and request == AclFilter() and not args.all:
        raise CliError("no filter option would delete every binding: give --all to mean that")
    with pykaf.sync.Admin(args.bootstrap_servers, **settings(args)) as admin:
        if isinstance(request, AclBinding):
            admin.create_acls([request])
            _show(args, [request])
        elif args.action == "list":
            _show(args, admin.describe_acls(request))
        else:
            _show(args, admin.delete_acls([request]))
    return 0
