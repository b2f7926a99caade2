"""Count inputs on which the compiled codec and its pure-Python twin disagree.

Builds valid record batches, damages them (byte flips and writes, insertions,
deletions, truncations, extreme header values, damage to the records before
compression), re-seals the CRC, decodes with both twins and compares every
field (or the error class), and checks that each twin's
``decode_columns`` holds the records its row decoder returns (or raises the
same error class). A one-off, long-running companion of
tests/codec/test_twins_agree.py::

    PYTHONPATH=. python tools/twin_probe.py --count 300000 --seed 1

prints the disagreement count and, per kind of difference, one example.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "codec"))

import twins
from twins import INT64_MAX, INT64_MIN, Mutation, Plan, RecordSpec

from pykaf import _codec, _codec_py

_TIMESTAMPS = (0, 1_700_000_000_000, -1, INT64_MAX, INT64_MAX - 5, INT64_MIN, INT64_MIN + 5)
_BLOBS = (None, b"", b"k", b"value" * 3, bytes(range(40)), b"\xff\xfe", "é".encode())
_CONTROL = 0x30  # transactional + control


def _int(rng: random.Random, bits: int) -> int:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return rng.choice(
        (lo, lo + 1, -1, 0, 1, hi - 1, hi, rng.randint(lo, hi), rng.randint(-300, 300))
    )


def random_plan(rng: random.Random) -> Plan:
    """One random batch and its damage."""
    control = rng.random() < 0.1
    if control:
        key = bytes([0, 0, 0, rng.choice((0, 1, 2))])
        records = [RecordSpec(0, 0, key, b"\x00\x00\x00\x00\x00\x05")]
    else:
        records = []
        for i in range(rng.choice((0, 1, 1, 2, 3, 5, 12))):
            headers = [("h", rng.choice(_BLOBS)) for _ in range(rng.choice((0, 0, 1, 2)))]
            records.append(
                RecordSpec(
                    i if rng.random() < 0.8 else _int(rng, 32),
                    rng.choice((0, i, _int(rng, 64))),
                    rng.choice(_BLOBS),
                    rng.choice(_BLOBS),
                    headers,
                    rng.choice((0, 0, 0, 0x80, 0xFF)),
                )
            )
    mutations = []
    for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
        kind = rng.choice(("flip", "flip", "set", "insert", "delete", "truncate", "field", "field"))
        m = Mutation(
            kind, rng.randrange(1 << 16), in_records=rng.random() < 0.3 and kind != "field"
        )
        if kind == "field":
            m.arg = rng.choice((_int(rng, 64), rng.randrange(-(1 << 15), 1 << 15), 0x80, 0x8000))
        elif kind in ("flip", "set"):
            m.arg = rng.choice((1 << rng.randrange(8), 0xFF, 0x80, 0x7F, 0x00, rng.randrange(256)))
        elif kind == "delete":
            m.arg = rng.choice((1, 1, 2, 4, 8))
        elif kind == "insert":
            m.data = bytes(rng.randrange(256) for _ in range(rng.choice((1, 1, 2, 5))))
        mutations.append(m)
    base_ts = rng.choice(_TIMESTAMPS)
    return Plan(
        records,
        codec=rng.choice((0, 0, 0, 1, 2, 3, 4)),
        base_offset=rng.choice((0, 42, INT64_MAX - 3, INT64_MAX, -1, INT64_MIN)),
        base_timestamp=base_ts,
        max_timestamp=rng.choice((None, base_ts, rng.choice(_TIMESTAMPS))),
        attributes=(_CONTROL if control else 0) | rng.choice((0, 0, 0x08, 0x10)),
        producer_id=rng.choice((-1, 7)),
        mutations=mutations,
        fix_length=rng.random() < 0.8,
        legacy_magic=None if rng.random() < 0.85 else rng.choice((0, 1)),
    )


def main() -> None:
    """Run the probe and print the disagreement count."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    diffs = 0
    kinds: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    for _ in range(args.count):
        plan = random_plan(rng)
        data = twins.build(plan)
        check = plan.legacy_magic is None  # legacy CRCs are not re-sealed
        a = twins.snapshot(_codec, data, check_crc=check)
        b = twins.snapshot(_codec_py, data, check_crc=check)
        if a != b:
            diffs += 1
            what = twins.first_difference(a, b)
            kind = what.split(":")[0]
            kinds[kind] += 1
            examples.setdefault(kind, f"{what}\n    input {data.hex()}")
        # decode_columns: the same records as the row decoder, in both twins.
        for name, codec, rows in (("cython", _codec, a), ("python", _codec_py, b)):
            columns = twins.column_snapshot(codec, data, check_crc=check)
            if columns != twins.rows_of(rows):
                diffs += 1
                kind = f"{name} columns vs rows"
                kinds[kind] += 1
                examples.setdefault(
                    kind,
                    f"{columns!r:.200} vs {twins.rows_of(rows)!r:.200}\n    input {data.hex()}",
                )
    print(f"{diffs} of {args.count} inputs decoded differently (seed {args.seed})")
    for kind, n in kinds.most_common():
        print(f"  {n:7d}  {kind}\n    e.g. {examples[kind]}")


if __name__ == "__main__":
    main()
