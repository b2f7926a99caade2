"""``make demo``: exercise the record codec and report what it did and how fast.

Encodes records into Kafka record batches with every compression codec, decodes
them back, checks the round trip, and prints throughput for the compiled codec
next to its pure-Python twin. Later layers grow this into produce-then-consume
against an embedded broker.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from types import ModuleType

from pykaf import _codec_py, codec
from pykaf._columns import BinaryColumn

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _make_values(count: int, size: int) -> list[bytes]:
    # Half random, half repetitive: compressible like real payloads, not trivially so.
    rnd = os.urandom(size // 2)
    return [(rnd + (b"%08d" % i) * (size // 16 + 1))[:size] for i in range(count)]


def _best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _encode(impl: ModuleType, values: list[bytes], compression: int) -> bytes:
    b = impl.BatchBuilder(compression=compression, max_bytes=1 << 30)
    append = b.append
    for i, v in enumerate(values):
        append(1_700_000_000_000 + i, None, v)
    return bytes(b.build())


def _decode_count(impl: ModuleType, data: bytes) -> int:
    n = 0
    for batch in impl.decode_batches(data):
        for rec in batch.records:
            n += rec.value is not None
    return n


def run(records: int, size: int, repeat: int) -> list[dict[str, object]]:
    """Encode and decode ``records`` values of ``size`` bytes; return one row per case."""
    values = _make_values(records, size)
    # pykaf.codec re-exports the active implementation's names, so it serves as one.
    impls: list[tuple[str, ModuleType]] = [(codec.IMPLEMENTATION, codec)]
    if codec.IMPLEMENTATION != "python":
        impls.append(("python", _codec_py))
    rows: list[dict[str, object]] = []
    for name, impl in impls:
        # The pure-Python twin is ~50x slower: a smaller sample tells its speed.
        n = records if name != "python" or len(impls) == 1 else min(records, 20_000)
        sample = values[:n]
        for cname in _CODECS:
            comp = codec.compression_code(cname)
            data = _encode(impl, sample, comp)
            if _decode_count(impl, data) != n:
                raise SystemExit(f"round trip failed for {name}/{cname}")

            def enc_once(
                impl: ModuleType = impl, comp: int = comp, sample: list[bytes] = sample
            ) -> None:
                _encode(impl, sample, comp)

            def dec_once(impl: ModuleType = impl, data: bytes = data) -> None:
                _decode_count(impl, data)

            enc = _best_of(enc_once, repeat)
            dec = _best_of(dec_once, repeat)
            rows.append(
                {
                    "impl": name,
                    "codec": cname,
                    "batch_bytes": len(data),
                    "ratio": n * size / len(data),
                    "encode_rps": n / enc,
                    "decode_rps": n / dec,
                }
            )
    # The columnar bulk path (what Spark feeds), compiled codec only.
    col = BinaryColumn.from_values(values)
    if codec.IMPLEMENTATION == "cython":

        def bulk() -> None:
            i = 0
            while i < records:
                b = codec.BatchBuilder(max_bytes=1 << 20)
                i = b.extend(col, start=i, timestamp=1_700_000_000_000)
                b.build()

        t = _best_of(bulk, repeat)
        rows.append(
            {
                "impl": "cython",
                "codec": "none (bulk extend)",
                "batch_bytes": 0,
                "ratio": 1.0,
                "encode_rps": records / t,
                "decode_rps": 0.0,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: ``python -m pykaf.demo [--records N] [--size B]``."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(
        f"pykaf codec demo: {args.records:,} records of {args.size} bytes, "
        f"active implementation: {codec.IMPLEMENTATION}"
    )
    rows = run(args.records, args.size, args.repeat)
    print(f"{'impl':8} {'codec':20} {'batch':>12} {'ratio':>6} {'encode':>14} {'decode':>14}")
    for r in rows:
        dec = f"{r['decode_rps']:,.0f}/s" if r["decode_rps"] else "-"
        size = f"{r['batch_bytes']:,}" if r["batch_bytes"] else "-"
        print(
            f"{r['impl']:8} {r['codec']:20} {size:>12} {r['ratio']:>6.2f} "
            f"{r['encode_rps']:>12,.0f}/s {dec:>14}"
        )
    print("every batch decoded back to the records it was built from")


if __name__ == "__main__":
    main()
