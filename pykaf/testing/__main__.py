"""``python -m pykaf.testing``: serve a fake Kafka cluster on loopback for other programs.

Prints the bootstrap servers on the first line of standard output, then serves
until interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

import trio

from pykaf.testing._fake.cluster import FakeCluster


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME:PASSWORD, not {text!r}")
    return name, password


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m pykaf.testing``."""
    p = argparse.ArgumentParser(
        prog="python -m pykaf.testing",
        description="Serve pykaf's in-memory fake Kafka cluster until interrupted.",
    )
    p.add_argument("--brokers", type=int, default=1, help="number of brokers (default 1)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        default=0,
        help="port of broker 1; broker N listens on PORT+N-1 (default: ports the OS picks)",
    )
    p.add_argument(
        "--partitions", type=int, default=3, help="partitions of auto-created topics (default 3)"
    )
    p.add_argument("--no-auto-create", action="store_true", help="refuse topics nobody created")
    p.add_argument(
        "--user",
        type=_user,
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a SASL user (repeatable); with any, clients must authenticate",
    )
    p.add_argument("--certfile", help="TLS: the server certificate chain (PEM)")
    p.add_argument("--keyfile", help="TLS: the server private key (PEM)")
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="a topic to create at start (repeatable)",
    )
    return p


def build(args: argparse.Namespace) -> FakeCluster:
    """The cluster the parsed arguments describe.

    Raises:
        ValueError: an argument is out of range.
    """
    ssl_context = None
    if args.certfile or args.keyfile:
        if not (args.certfile and args.keyfile):
            raise ValueError("TLS needs both --certfile and --keyfile")
        import ssl

        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(args.certfile, args.keyfile)
    ports = [args.port + i for i in range(args.brokers)] if args.port else None
    cluster = FakeCluster(
        args.brokers,
        host=args.host,
        ports=ports,
        default_partitions=args.partitions,
        auto_create_topics=not args.no_auto_create,
        users=dict(args.user) if args.user else None,
        ssl_context=ssl_context,
    )
    for spec in args.topic:
        name, _, count = spec.partition(":")
        cluster.create_topic(name, int(count) if count else None)
    return cluster


async def serve(cluster: FakeCluster) -> None:
    """Serve ``cluster``, print its bootstrap servers, and stop on SIGINT or SIGTERM."""
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        print(cluster.bootstrap, flush=True)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                break
        nursery.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit status."""
    args = parser().parse_args(argv)
    try:
        cluster = build(args)
    except (ValueError, OSError) as exc:
        print(f"python -m pykaf.testing: {exc}", file=sys.stderr)
        return 2
    try:
        trio.run(serve, cluster)
    except OSError as exc:
        print(f"python -m pykaf.testing: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
