"""What the subcommands share: connection options, ``-X`` settings, JSON output, errors.

Tables and progress are drawn by :mod:`pykaf._output`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_BOOTSTRAP = "localhost:9092"


class CliError(Exception):
    """A usage problem found after parsing (printed with the command's usage, exit status 2)."""


class DataError(Exception):
    """Input the command cannot use, such as a malformed line (``pykaf: message``, exit 1)."""


def add_connection(parser: argparse.ArgumentParser, *, prefix: str = "") -> None:
    """``-b`` and ``-X``, which every subcommand that talks to a cluster takes.

    ``prefix`` names their destinations apart: the top-level parser's copies
    (``pykaf -b HOST produce``) would otherwise be overwritten by the
    subcommand's defaults. :func:`merge_global_connection` joins the two.
    """
    parser.add_argument(
        "-b",
        "--bootstrap-servers",
        dest=f"{prefix}bootstrap_servers",
        default=None,
        metavar="HOST:PORT[,...]",
        help="brokers to start from (default: $PYKAF_BOOTSTRAP_SERVERS or localhost:9092)",
    )
    parser.add_argument(
        "-X",
        dest=f"{prefix}settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pykaf option, e.g. -X request_timeout=5 -X sasl_mechanism=PLAIN (repeatable)",
    )


def add_global_connection(parser: argparse.ArgumentParser) -> None:
    """``-b`` and ``-X`` before the command: ``pykaf -b HOST:PORT consume ...``."""
    add_connection(parser, prefix="global_")


def merge_global_connection(args: argparse.Namespace) -> None:
    """One ``bootstrap_servers`` and ``settings`` from both places and the environment.

    The command's own ``-b`` wins over one given before it; ``-X`` settings
    add up, the command's last.
    """
    own = getattr(args, "bootstrap_servers", None)
    args.bootstrap_servers = (
        own
        or args.global_bootstrap_servers
        or os.environ.get("PYKAF_BOOTSTRAP_SERVERS")
        or DEFAULT_BOOTSTRAP
    )
    args.settings = [*args.global_settings, *getattr(args, "settings", [])]


def parse_value(text: str) -> Any:
    """A ``-X`` value: true/false, an int, a float, or the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def pairs(items: Sequence[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` strings as a dict.

    Raises:
        CliError: an item without ``=``.
    """
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CliError(f"{what} must look like NAME=VALUE, not {item!r}")
        out[name] = value
    return out


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``-X`` options, typed."""
    return {k: parse_value(v) for k, v in pairs(args.settings, "-X").items()}


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``-X`` options a client takes (for the admin calls a command makes on the side)."""
    from pykaf._config import ClientConfig

    return {k: v for k, v in settings(args).items() if k in ClientConfig.__dataclass_fields__}


def plural(count: int, noun: str) -> str:
    """``1 record``, ``2 records``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def print_json(value: Any) -> None:
    """One JSON document on stdout."""
    json.dump(value, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def partitions_arg(text: str) -> list[int]:
    """``0,2,5`` as partition indexes."""
    try:
        out = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected partitions like 0,1,2, not {text!r}") from None
    if not out or any(p < 0 for p in out):
        raise argparse.ArgumentTypeError(f"expected partitions like 0,1,2, not {text!r}")
    return out


def add_producer_options(parser: argparse.ArgumentParser) -> None:
    """``-z``, ``--acks`` and ``--linger-ms``: what the producing commands share."""
    from pykaf import codec

    parser.add_argument("-z", "--compression", choices=codec.COMPRESSION_NAMES, default="none")
    parser.add_argument("--acks", choices=["0", "1", "all"], default="all")
    parser.add_argument("--linger-ms", type=float, default=5.0)


def producer_options(args: argparse.Namespace) -> dict[str, Any]:
    """Producer options from :func:`add_producer_options`' arguments and ``-X``.

    acks 0 or 1 turn idempotence off (it needs acks=all) unless ``-X`` says otherwise.
    A topic that does not exist is asked for, as kcat and Kafka's console
    producer ask: the broker's own ``auto.create.topics.enable`` decides
    whether it is created (``-X allow_auto_create_topics=false`` keeps the
    client from asking).
    """
    options: dict[str, Any] = {
        "acks": "all" if args.acks == "all" else int(args.acks),
        "linger": args.linger_ms / 1000,
        "compression": args.compression,
        **settings(args),
    }
    if options["acks"] != "all":
        options.setdefault("idempotence", False)
    options.setdefault("allow_auto_create_topics", True)
    return options
