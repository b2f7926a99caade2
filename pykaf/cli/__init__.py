"""The ``pykaf`` command: console producer and consumer, topics, groups, ACLs, perf, the demo.

::

    pykaf topics create orders -p 6 -b localhost:9092
    seq 1000 | pykaf produce orders
    pykaf consume orders --from beginning -n 10 --format json
    pykaf groups lag billing
    pykaf acls create --resource-type topic --name orders --principal User:alice --operation read
    pykaf perf produce bench -n 1000000 -s 100 --json

Also ``python -m pykaf``. Exit status: 0 done, 1 a Kafka or connection error
(printed as ``pykaf: ErrorClass: message``), 2 a usage error, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys

from pykaf import errors
from pykaf.cli._acls import add_acls
from pykaf.cli._common import CliError
from pykaf.cli._console import add_consume, add_produce
from pykaf.cli._manage import add_groups, add_topics
from pykaf.cli._perf import add_perf


def parser() -> argparse.ArgumentParser:
    """The whole command line."""
    ap = argparse.ArgumentParser(prog="pykaf", description="pykaf's command-line tools.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_produce(sub)
    add_consume(sub)
    add_topics(sub)
    add_groups(sub)
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

        return demo_main(argv[1:])
    ap = parser()
    args = ap.parse_args(argv)
    try:
        status: int = args.run(args)
        return status
    except CliError as exc:
        ap.error(str(exc))
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


__all__ = ["main", "parser"]
