"""The ``pykaf`` command: console clients, topics, groups, share groups, ACLs, perf, the demo.

::

    pykaf topics create orders -p 6 -b localhost:9092
    seq 1000 | pykaf produce orders
    pykaf consume orders --from beginning -n 10 --format json
    pykaf groups lag billing
    pykaf share consume jobs -g workers --from beginning -n 10
    pykaf groups config workers --set share.record.lock.duration.ms=15000
    pykaf acls create --resource-type topic --name orders --principal User:alice --operation read
    pykaf perf produce bench -n 1000000 -s 100 --json

Also ``python -m pykaf``. Exit status: 0 done, 1 a Kafka or connection error
(printed as ``pykaf: ErrorClass: message``) or input the command cannot use
(``pykaf: message``), 2 a usage error (with the usage of the command it is
in), 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

if sys.version_info < (3, 11):  # pragma: no cover - trio installs the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

from pykaf import errors
from pykaf.cli._acls import add_acls
from pykaf.cli._common import (
    CliError,
    DataError,
    add_global_connection,
    merge_global_connection,
)
from pykaf.cli._console import add_consume, add_produce
from pykaf.cli._manage import add_groups, add_topics
from pykaf.cli._perf import add_perf
from pykaf.cli._share import add_share


class _Parser(argparse.ArgumentParser):
    """A parser that refuses what it does not know itself, with its own usage.

    argparse hands a subcommand's unknown arguments up to the top-level
    parser, whose error shows the top-level usage: ``pykaf topics create t
    --bogus`` would not show ``topics create``'s options. Each parser of the
    tree is one of these (``add_subparsers`` makes its parsers of its
    parent's class), so the one that met the argument refuses it. The
    innermost parser is kept on the namespace as ``usage_parser``: a usage
    problem found after parsing (:class:`CliError`) shows its usage too.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args``; refuse any left over with this parser's usage (exit 2)."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        if getattr(parsed, "usage_parser", None) is None:  # the innermost parser ends first
            parsed.usage_parser = self
        return parsed, extras


def parser() -> argparse.ArgumentParser:
    """The whole command line.

    ``-b`` and ``-X`` go before the command (as kcat users type them) or after it.
    """
    from pykaf import __version__

    ap = _Parser(prog="pykaf", description="pykaf's command-line tools.")
    ap.add_argument("--version", action="version", version=f"pykaf {__version__}")
    add_global_connection(ap)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_produce(sub)
    add_consume(sub)
    add_topics(sub)
    add_groups(sub)
    add_share(sub)
    add_acls(sub)
    add_perf(sub)
    sub.add_parser(
        "demo", help="the demo: an embedded broker, produce, consume, summary (pykaf demo -h)"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        from pykaf.demo import main as demo_main

        return demo_main(argv[1:], prog="pykaf demo")
    ap = parser()
    if not argv:  # a bare ``pykaf``: no command is a usage error; say what it can do
        ap.print_help(sys.stderr)
        return 2
    args = ap.parse_args(argv)
    merge_global_connection(args)
    try:
        try:
            status: int = args.run(args)
            return status
        except BaseExceptionGroup as group:
            # trio's nurseries wrap what a command raises: show the error
            # inside, never the group's traceback.
            raise first_leaf(group) from None
    except CliError as exc:
        getattr(args, "usage_parser", ap).error(str(exc))
    except DataError as exc:
        print(f"pykaf: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (``pykaf consume ... | head``): a normal end.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (errors.PykafError, OSError) as exc:
        print(f"pykaf: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2  # unreachable: ap.error exits


def first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The exception a group stands for: the first one that is not a group itself.

    An interruption (Ctrl-C) wins over the errors it caused elsewhere.
    """
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack[:0] = list(exc.exceptions)
        else:
            leaves.append(exc)
    for leaf in leaves:
        if isinstance(leaf, KeyboardInterrupt):
            return leaf
    return leaves[0]


__all__ = ["first_leaf", "main", "parser"]
