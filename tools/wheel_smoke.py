"""Smoke test of an installed pykaf wheel: cibuildwheel's ``test-command``.

Run: python tools/wheel_smoke.py   (with the wheel installed, outside the checkout)

Checks that pykaf is imported from site-packages with its compiled codec (not
the pure-Python twin), then produces records with every compression codec to
pykaf's in-memory fake cluster and reads them back. The fake cluster needs no
broker binary, so this runs on every platform a release builds (the embedded
Tansu broker of ``make demo`` comes from a package that does not cover them all).
"""

from __future__ import annotations

import sys

import trio

import pykaf
from pykaf import codec
from pykaf.testing import open_fake_cluster

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


async def round_trip() -> int:
    """Produce 100 records per compression to a fake cluster, read them back; how many."""
    read = 0
    async with open_fake_cluster(1) as cluster:
        for compression in COMPRESSIONS:
            topic = f"smoke-{compression}"
            cluster.create_topic(topic, 1)
            values = [b"%s %d" % (compression.encode(), i) for i in range(100)]
            async with pykaf.open_producer(cluster.bootstrap, compression=compression) as p:
                for value in values:
                    p.send_nowait(topic, value, key=b"k", partition=0)
            async with pykaf.open_consumer(cluster.bootstrap) as consumer:
                pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
                got: list[bytes | None] = []
                with trio.fail_after(30):
                    while len(got) < len(values):
                        got += [r.value for r in await pc.next_batch()]
            if got != values:
                raise SystemExit(f"{compression}: read back {got[:3]}... not what was sent")
            read += len(got)
    return read


def main() -> int:
    if codec.IMPLEMENTATION != "cython":
        print(f"pykaf runs its {codec.IMPLEMENTATION} codec, not the compiled one", file=sys.stderr)
        return 1
    read = trio.run(round_trip)
    print(f"pykaf {pykaf.__version__} from {pykaf.__file__}: compiled codec, {read} records back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
