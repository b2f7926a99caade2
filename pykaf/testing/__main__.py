"""``python -m pykaf.testing``: serve a test cluster on loopback for other programs.

``python -m pykaf.testing [options]`` serves pykaf's fake cluster;
``python -m pykaf.testing kafka [options]`` runs real Apache Kafka (KRaft), and
``python -m pykaf.testing kafka --fetch`` only fetches its jars (``make kafka``).
Each prints the bootstrap servers on the first line of standard output, then
serves until interrupted (Ctrl-C or SIGTERM).
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
    p.add_argument(
        "--transaction-version",
        type=int,
        choices=(1, 2),
        default=1,
        help="the finalized transaction.version: 2 for transactions V2, KIP-890 (default 1)",
    )
    p.add_argument(
        "--client-telemetry",
        action="store_true",
        help="advertise KIP-714 client metrics (clients push what subscriptions ask)",
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
        transaction_version=args.transaction_version,
        client_telemetry=args.client_telemetry,
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


def kafka_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m pykaf.testing kafka``."""
    p = argparse.ArgumentParser(
        prog="python -m pykaf.testing kafka",
        description="Run an Apache Kafka cluster (KRaft) on loopback until interrupted.",
    )
    p.add_argument("--brokers", type=int, default=1, help="number of nodes (default 1)")
    p.add_argument(
        "--version",
        help="Apache Kafka release, 3.7.x to 4.4.x (default: $PYKAF_KAFKA_VERSION, else "
        "pykaf's pinned one); another is refused at once",
    )
    p.add_argument(
        "--fetch",
        action="store_true",
        help="only fetch Kafka's jars (or check PYKAF_KAFKA_HOME), print where, and exit",
    )
    p.add_argument(
        "--user",
        type=_user,
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a SASL user (repeatable): adds the SASL_PLAINTEXT listener",
    )
    p.add_argument("--tls", action="store_true", help="add TLS listeners (prints the CA file)")
    p.add_argument(
        "--acls", action="store_true", help="enforce ACLs (super users: ANONYMOUS and 'admin')"
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server property for every node (repeatable)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="a topic to create at start (repeatable)",
    )
    p.add_argument(
        "--feature",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="format with this feature level, e.g. transaction.version=1 (repeatable)",
    )
    p.add_argument("--directory", help="keep data and logs here (default: a temporary directory)")
    return p


def kafka_main(argv: Sequence[str]) -> int:
    """``python -m pykaf.testing kafka``: run Kafka until interrupted."""
    import contextlib

    from pykaf.testing._certs import TLSCertificates
    from pykaf.testing._kafka import KafkaCluster, KafkaClusterError
    from pykaf.testing._kafka_dist import KafkaUnavailableError, kafka_home

    args = kafka_parser().parse_args(argv)
    configs: dict[str, str] = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"python -m pykaf.testing kafka: not KEY=VALUE: {item!r}", file=sys.stderr)
            return 2
        configs[key] = value
    features: dict[str, int] = {}
    for item in args.feature:
        key, sep, value = item.partition("=")
        if not sep or not key or not value.isdigit():
            print(f"python -m pykaf.testing kafka: not NAME=LEVEL: {item!r}", file=sys.stderr)
            return 2
        features[key] = int(value)
    try:
        if args.fetch:
            print(kafka_home(args.version), flush=True)
            return 0
        with contextlib.ExitStack() as stack:
            certs = stack.enter_context(TLSCertificates()) if args.tls else None
            cluster = stack.enter_context(
                KafkaCluster(
                    args.brokers,
                    version=args.version,
                    users=dict(args.user),
                    certificates=certs,
                    authorizer=args.acls,
                    broker_configs=configs,
                    directory=args.directory,
                    features=features,
                )
            )
            for spec in args.topic:
                name, _, count = spec.partition(":")
                cluster.create_topic(name, int(count) if count else 1)
            print(cluster.bootstrap, flush=True)
            if args.user:
                print(f"sasl: {cluster.sasl_bootstrap}", flush=True)
            if certs is not None:
                print(f"tls: {cluster.tls_bootstrap} (CA {certs.ca_file})", flush=True)
            _wait_for_signal()
    except (KafkaUnavailableError, KafkaClusterError, ValueError) as exc:
        print(f"python -m pykaf.testing kafka: {exc}", file=sys.stderr)
        return 1
    return 0


def _wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM."""
    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda number, _frame: received.append(number))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        while not received:
            signal.pause()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kafka"]:
        return kafka_main(argv[1:])
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
