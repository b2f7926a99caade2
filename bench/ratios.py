#!/usr/bin/env python3
"""pykaf's speed relative to its peers, from pytest-benchmark JSON; and the regression check.

Absolute times are never compared across runs (the machines are shared and
noisy): only the ratio of each peer's time to pykaf's *within one run*. For a
group (a case) and a peer, ``ratio = peer time per record / pykaf time per
record`` from the median rounds (``--stat min``: the fastest rounds), i.e. how
many times faster pykaf is (> 1: pykaf wins). Every pykaf label (``pykaf``,
``pykaf-py``, with a variant such as ``pykaf[column]``) is paired with every
peer of the same group whose ``extra_info["params"]`` equal its own. See
``bench/_support.py`` for the tags.

Usage::

    python bench/ratios.py RESULTS.json            # table + bench/results/ratios.json
    python bench/ratios.py RESULTS.json --check bench/baseline.json
    python bench/ratios.py R1.json R2.json R3.json --update bench/baseline.json --tolerance 0.25
    python bench/ratios.py BROKERS.json --update bench/baseline.json --merge

Given several result files, each ratio is the median over them, and the
spread between runs is printed (the evidence for the tolerance).

``--check`` exits 1 when a ratio fell more than the tolerance below the
baseline (``current < baseline * (1 - tolerance)``), or when a baseline ratio is
missing from the run (unless ``--allow-missing``); it prints which.
``--update`` writes the current ratios as the new baseline, keeping the
baseline's tolerance and its evidence unless ``--tolerance`` is given; with
``--merge`` the baseline's ratios the run did not measure stay (so that a
run of some benchmark files updates only theirs). The
baseline records the statistic its ratios use; ``--check`` uses the same one.

What the client adds: a benchmark whose job has a part no client can make
faster (Spark handing rows to a Python task) lists the seconds of the same job
with the client's work left out in ``extra_info["floor_s"]``. Besides its own
group it then counts in ``GROUP:added``, timed by its time less that floor, so
that the ratio there compares what each client adds (issue 33's per-row Spark
rule: pykaf's added time at most two thirds of confluent-kafka's, a ratio of
at least 1.5).

Self-timed peers: a benchmark that runs another program which reports its own
timing (Kafka's ``ProducerPerformance`` and ``ConsumerPerformance``, whose
summaries leave out the JVM's start) lists that program's seconds per round in
``extra_info["self_timed_s"]``. It then gives two results: its label, timed by
the program's own figures (the same statistic over them), and
``label[process]`` (``label[variant,process]``), timed by the harness around
the whole program, start-up included (not with ``extra_info["self_timed_process"]``
false, for a second figure of the same program).
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "ratios.json"
DEFAULT_TOLERANCE = 0.25
STATISTICS = ("median", "min")
SUBJECT_PREFIX = "pykaf"


@dataclass(frozen=True)
class Entry:
    """One benchmark of a run: who ran which case, how fast."""

    name: str
    group: str
    client: str
    label: str  # client plus [variant]
    role: str  # "subject" (pykaf) or "peer"
    params: str
    records: int
    time: float  # seconds per call: the chosen statistic (median round by default)
    cpu_s_per_m: float | None = None  # the client's CPU seconds per million records, if noted

    @property
    def per_record(self) -> float:
        """Seconds per record."""
        return self.time / self.records

    @property
    def records_per_s(self) -> float:
        """Records per second."""
        return self.records / self.time if self.time > 0 else float("inf")


@dataclass(frozen=True)
class Ratio:
    """How many times faster a pykaf label is than one peer on one case."""

    group: str
    subject: str
    peer: str
    params: str
    ratio: float
    subject_records_per_s: float
    peer_records_per_s: float
    #: The peer's CPU seconds per record over pykaf's (> 1: pykaf spends less), if both noted.
    cpu_ratio: float | None = None

    @property
    def key(self) -> str:
        """The ratio's name in ratios.json and the baseline."""
        return ratio_key(self.group, self.subject, self.peer)


def ratio_key(group: str, subject: str, peer: str) -> str:
    """``"group | subject | peer"``."""
    return f"{group} | {subject} | {peer}"


class InputError(Exception):
    """A results or baseline file that cannot be used."""


# -- reading -------------------------------------------------------------------
def load_json(path: Path) -> dict[str, Any]:
    """Read a JSON object from ``path``, with a readable error."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def read_entries(path: Path, warnings: list[str], stat: str = "median") -> list[Entry]:
    """The tagged benchmarks of a pytest-benchmark JSON file, timed by ``stat``."""
    data = load_json(path)
    raw = data.get("benchmarks")
    if not isinstance(raw, list):
        raise InputError(f"{path}: no 'benchmarks' list; is it pytest-benchmark JSON?")
    if not raw:
        raise InputError(f"{path}: no benchmark ran (all skipped or --benchmark-disable?)")
    entries = []
    untagged = []
    for bench in raw:
        info = bench.get("extra_info") or {}
        client = info.get("client")
        time = (bench.get("stats") or {}).get(stat)
        if not client or not bench.get("group") or time is None:
            untagged.append(bench.get("name", "?"))
            continue
        variant = info.get("variant")
        role = info.get("role") or ("subject" if client.startswith(SUBJECT_PREFIX) else "peer")
        label = f"{client}[{variant}]" if variant else client
        own = info.get("self_timed_s")
        if own:  # the program's own timing, then the harness's around the whole process
            process = f"{client}[{variant},process]" if variant else f"{client}[process]"
            timings = [(label, _statistic([float(t) for t in own], stat))]
            if info.get("self_timed_process", True):
                timings.append((process, float(time)))
        else:
            timings = [(label, float(time))]
        floor = info.get("floor_s")
        groups = [(bench["group"], 0.0)]
        if isinstance(floor, (int, float)) and floor > 0:
            groups.append((f"{bench['group']}:added", float(floor)))
        for (shown, seconds), (group, less) in itertools.product(timings, groups):
            if seconds <= less:
                warnings.append(f"{group}: {shown} took {seconds} s, not more than the floor")
                continue
            entries.append(
                Entry(
                    name=bench.get("name", "?"),
                    group=group,
                    client=client,
                    label=shown,
                    role=role,
                    params=info.get("params") or "",
                    records=int(info.get("records") or 1),
                    time=seconds - less,
                    cpu_s_per_m=(
                        _cpu(info.get("cpu_s_per_M")) if shown == label and not less else None
                    ),
                )
            )
    if untagged:
        warnings.append(
            f"{path}: {len(untagged)} benchmark(s) lack a group or extra_info['client'] and were "
            f"ignored: {', '.join(untagged[:5])}{' ...' if len(untagged) > 5 else ''}"
        )
    return entries


def _cpu(value: Any) -> float | None:
    """A noted CPU figure, or None when absent or not a positive number."""
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _median_or_none(values: list[float | None]) -> float | None:
    """The median of the values that are not None; None if there are none."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _statistic(values: list[float], stat: str) -> float:
    """``stat`` (median or min) of a self-timed benchmark's per-round seconds."""
    return min(values) if stat == "min" else statistics.median(values)


def compute_ratios(entries: list[Entry], warnings: list[str]) -> list[Ratio]:
    """Pair every pykaf label with every peer of its group that has the same params."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.group, []).append(entry)
    ratios: list[Ratio] = []
    seen: set[str] = set()
    for group, members in groups.items():
        subjects = [e for e in members if e.role == "subject"]
        peers = [e for e in members if e.role != "subject"]
        if not subjects:
            warnings.append(f"{group}: no pykaf result (codec not built or its benchmark skipped?)")
            continue
        if not peers:
            warnings.append(f"{group}: no peer result (peers not installed or skipped?)")
            continue
        for peer in peers:
            if not any(s.params == peer.params for s in subjects):
                warnings.append(
                    f"{group}: peer {peer.label} ({peer.params or 'no params'}) "
                    "has no pykaf result with the same params"
                )
        for subject in subjects:
            for peer in (p for p in peers if p.params == subject.params):
                ratio = Ratio(
                    group=group,
                    subject=subject.label,
                    peer=peer.label,
                    params=peer.params,
                    ratio=peer.per_record / subject.per_record,
                    subject_records_per_s=subject.records_per_s,
                    peer_records_per_s=peer.records_per_s,
                    cpu_ratio=(
                        peer.cpu_s_per_m / subject.cpu_s_per_m
                        if peer.cpu_s_per_m and subject.cpu_s_per_m
                        else None
                    ),
                )
                if ratio.key in seen:
                    raise InputError(
                        f"two results for {ratio.key}: give the pykaf benchmarks distinct "
                        "variants or params"
                    )
                seen.add(ratio.key)
                ratios.append(ratio)
    return ratios


def combine_runs(runs: list[list[Ratio]]) -> tuple[list[Ratio], dict[str, dict[str, float]]]:
    """The median of each ratio over several runs, and how much it varied.

    Returns the median ratios (records/s: medians too) and, per key, the runs'
    min/median/max, the relative spread ``(max - min) / median`` and the
    worst downward deviation ``(median - min) / median``.
    """
    by_key: dict[str, list[Ratio]] = {}
    order: list[str] = []
    for run in runs:
        for r in run:
            if r.key not in by_key:
                order.append(r.key)
            by_key.setdefault(r.key, []).append(r)
    combined: list[Ratio] = []
    spread: dict[str, dict[str, float]] = {}
    for key in order:
        rs = by_key[key]
        values = [r.ratio for r in rs]
        med = statistics.median(values)
        first = rs[0]
        combined.append(
            Ratio(
                group=first.group,
                subject=first.subject,
                peer=first.peer,
                params=first.params,
                ratio=med,
                subject_records_per_s=statistics.median(r.subject_records_per_s for r in rs),
                peer_records_per_s=statistics.median(r.peer_records_per_s for r in rs),
                cpu_ratio=_median_or_none([r.cpu_ratio for r in rs]),
            )
        )
        spread[key] = {
            "runs": len(values),
            "min": min(values),
            "median": med,
            "max": max(values),
            "spread": (max(values) - min(values)) / med,
            "down": (med - min(values)) / med,
        }
    return combined, spread


# -- printing ----------------------------------------------------------------------
def fmt_ratio(value: float) -> str:
    """A ratio with three significant digits at least: ``2.10x``, ``0.0311x``."""
    return f"{value:.2f}x" if value >= 1 else f"{value:.3g}x"


def rate(value: float) -> str:
    """Records/s, short: ``6.05M/s``."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}/s"
    return f"{value:.3g}/s"


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain text table, columns left-aligned except numbers."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    numeric = [all(_is_number(r[i]) for r in rows) if rows else False for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        cells = [
            str(c).rjust(w) if num else str(c).ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(r) for r in rows)])


def _is_number(text: str) -> bool:
    stripped = text.rstrip("x%").replace("/s", "").rstrip("kMG")
    try:
        float(stripped)
    except ValueError:
        return False
    return True


def print_ratios(ratios: list[Ratio], stat: str) -> None:
    """The ratio table: one line per (case, pykaf label, peer)."""
    rows = [
        [
            r.group,
            r.subject,
            r.peer,
            r.params or "-",
            fmt_ratio(r.ratio),
            rate(r.subject_records_per_s),
            rate(r.peer_records_per_s),
            "-" if r.cpu_ratio is None else fmt_ratio(r.cpu_ratio),
        ]
        for r in ratios
    ]
    header = ["case", "pykaf", "peer", "params", "speedup", "pykaf rec/s", "peer rec/s", "cpu"]
    print(table(rows, header))
    print(f"speedup = peer time / pykaf time per record ({stat} rounds); > 1: pykaf is faster")
    print("cpu = peer CPU / pykaf CPU per record (median rounds, this process's threads)")


def print_spread(spread: dict[str, dict[str, float]]) -> None:
    """Per ratio: its values over the runs and how far they strayed from the median."""
    rows = [
        [
            key,
            f"{s['min']:.3f}",
            f"{s['median']:.3f}",
            f"{s['max']:.3f}",
            f"{100 * s['spread']:.1f}%",
            f"{100 * s['down']:.1f}%",
        ]
        for key, s in spread.items()
    ]
    runs = max((int(s["runs"]) for s in spread.values()), default=0)
    print(f"\nvariation over {runs} runs")
    print(table(rows, ["ratio", "min", "median", "max", "spread", "below median"]))
    if spread:
        worst_down = max(spread.items(), key=lambda kv: kv[1]["down"])
        worst_spread = max(spread.items(), key=lambda kv: kv[1]["spread"])
        print(
            f"worst drop below the median: {100 * worst_down[1]['down']:.1f}% ({worst_down[0]}); "
            f"worst spread: {100 * worst_spread[1]['spread']:.1f}% ({worst_spread[0]})"
        )


def print_implementations(paths: list[Path]) -> None:
    """What the run measured (recorded by bench/conftest.py), from the first file."""
    meta = load_json(paths[0]).get("pykaf_bench", {}).get("implementations")
    if not meta:
        return
    aio = meta.get("aiokafka", {})
    if aio.get("installed"):
        kind = "Cython" if aio.get("cython") else "PURE PYTHON (not benchmarked)"
        print(f"aiokafka {aio.get('version')}: {aio.get('builder')} [{kind}]")
    kp = meta.get("kafka-python", {})
    if kp.get("installed"):
        print(f"kafka-python {kp.get('version')}: pure Python")
    ck = meta.get("confluent-kafka", {})
    if ck.get("installed"):
        print(f"confluent-kafka {ck.get('version')}: librdkafka {ck.get('librdkafka')}")
    for label, info in (meta.get("pykaf") or {}).items():
        print(
            f"{label}: {info.get('implementation') or 'NOT AVAILABLE: ' + str(info.get('error'))}"
        )
    print()


# -- baseline -------------------------------------------------------------------------
def choose_statistic(given: str | None, baseline_path: Path | None, *, must_exist: bool) -> str:
    """The statistic to compare: the one given, else the baseline's, else the median.

    Raises:
        InputError: if the one given differs from the one a checked baseline holds.
    """
    held = None
    if baseline_path is not None and (must_exist or baseline_path.exists()):
        held = load_json(baseline_path).get("statistic", "median")
    if given is None:
        return held or "median"
    if must_exist and held != given:
        raise InputError(
            f"{baseline_path} holds {held} ratios; checking {given} ratios against them would "
            "compare different things (rewrite it with --update --stat)"
        )
    return given


def tolerance_for(baseline: dict[str, Any], key: str) -> float:
    """The baseline's tolerance for ``key``.

    ``baseline["tolerances"]`` may override the global ``tolerance``: its keys
    are ratio keys or shell-style patterns over them (``"* | pykaf-py* | *"``);
    an exact key wins, else the first pattern that matches, else the global one.
    """
    overrides: dict[str, float] = baseline.get("tolerances") or {}
    if key in overrides:
        return float(overrides[key])
    for pattern, tolerance in overrides.items():
        if fnmatch.fnmatchcase(key, pattern):
            return float(tolerance)
    return float(baseline.get("tolerance", DEFAULT_TOLERANCE))


def check(ratios: list[Ratio], baseline_path: Path, allow_missing: bool) -> int:
    """Compare with the baseline; print the verdict; return the exit status."""
    baseline = load_json(baseline_path)
    expected = baseline.get("ratios")
    if not isinstance(expected, dict) or not expected:
        raise InputError(f"{baseline_path}: no 'ratios' in the baseline; create it with --update")
    current = {r.key: r for r in ratios}
    rows = []
    regressed: list[str] = []
    missing: list[str] = []
    for key, base in expected.items():
        tol = tolerance_for(baseline, key)
        floor = float(base) * (1 - tol)
        now = current.get(key)
        if now is None:
            missing.append(key)
            rows.append(
                [
                    key,
                    fmt_ratio(float(base)),
                    "-",
                    fmt_ratio(floor),
                    f"-{100 * tol:.0f}%",
                    "-",
                    "MISSING",
                ]
            )
            continue
        change = now.ratio / float(base) - 1
        status = "ok"
        if now.ratio < floor:
            status = "REGRESSED"
            regressed.append(
                f"{key}: {fmt_ratio(now.ratio)} vs baseline {fmt_ratio(float(base))} "
                f"({100 * change:+.1f}%, tolerance -{100 * tol:.0f}%)"
            )
        rows.append(
            [
                key,
                fmt_ratio(float(base)),
                fmt_ratio(now.ratio),
                fmt_ratio(floor),
                f"-{100 * tol:.0f}%",
                f"{100 * change:+.1f}%",
                status,
            ]
        )
    print(f"\ncheck against {baseline_path}: a ratio fails below baseline * (1 - tolerance)")
    print(table(rows, ["ratio", "baseline", "now", "floor", "tolerance", "change", "status"]))
    new = [k for k in current if k not in expected]
    if new:
        print(f"\nnot in the baseline (not checked; add them with --update): {', '.join(new)}")
    exit_code = 0
    if missing:
        print(
            f"\nMISSING from this run ({len(missing)}), the benchmark did not run or was skipped:"
        )
        for key in missing:
            print(f"  {key}")
        if not allow_missing:
            exit_code = 1
    if regressed:
        print(f"\nREGRESSED ({len(regressed)}): pykaf lost ground against a peer")
        for line in regressed:
            print(f"  {line}")
        exit_code = 1
    if exit_code == 0:
        print("\nno ratio fell below its baseline by more than the tolerance")
    return exit_code


def update(
    ratios: list[Ratio],
    baseline_path: Path,
    tolerance: float | None,
    sources: list[Path],
    spread: dict[str, dict[str, float]] | None,
    stat: str,
    *,
    merge: bool = False,
) -> None:
    """Write ``ratios`` as the new baseline (keeping the old tolerance unless given).

    With ``merge``, the old baseline's ratios that ``ratios`` lacks stay (a run
    of some benchmark files updates theirs only); its sources are kept too.
    """
    old: dict[str, Any] = {}
    if baseline_path.exists():
        old = load_json(baseline_path)
    if merge and old.get("statistic", stat) != stat:
        raise InputError(
            f"{baseline_path} uses the {old.get('statistic')} statistic; cannot merge {stat} ratios"
        )
    out: dict[str, Any] = {
        "description": (
            "pykaf speed relative to its peers (peer time / pykaf time per record, from each "
            "benchmark's rounds as 'statistic' says; > 1 means pykaf is faster). Written by "
            "bench/ratios.py --update; checked by bench/ratios.py --check. A ratio fails when it "
            "drops below baseline * (1 - tolerance)."
        ),
        "statistic": stat,
        "tolerance": tolerance
        if tolerance is not None
        else old.get("tolerance", DEFAULT_TOLERANCE),
    }
    if old.get("tolerances"):
        out["tolerances"] = old["tolerances"]
    if tolerance is None and old.get("tolerance_evidence"):
        out["tolerance_evidence"] = old["tolerance_evidence"]
    if spread and len(sources) > 1:
        worst_down = max(spread.items(), key=lambda kv: kv[1]["down"])
        worst_spread = max(spread.items(), key=lambda kv: kv[1]["spread"])
        out["observed_variation"] = {
            "runs": len(sources),
            "worst_drop_below_median": round(worst_down[1]["down"], 4),
            "worst_drop_ratio": worst_down[0],
            "worst_relative_spread": round(worst_spread[1]["spread"], 4),
            "worst_spread_ratio": worst_spread[0],
            "per_ratio_spread": {k: round(v["spread"], 4) for k, v in spread.items()},
        }
    elif merge and old.get("observed_variation"):
        out["observed_variation"] = old["observed_variation"]  # one run shows no spread
    out["sources"] = [str(p) for p in sources]
    out["ratios"] = {r.key: round(r.ratio, 4) for r in ratios}
    out["records_per_s"] = {
        r.key: {"pykaf": round(r.subject_records_per_s), "peer": round(r.peer_records_per_s)}
        for r in ratios
    }
    if merge and old:
        kept = {k: v for k, v in (old.get("ratios") or {}).items() if k not in out["ratios"]}
        rates = old.get("records_per_s") or {}
        out["sources"] = list(old.get("sources") or []) + out["sources"]
        out["ratios"] = {**kept, **out["ratios"]}
        out["records_per_s"] = {**{k: rates[k] for k in kept if k in rates}, **out["records_per_s"]}
        print(f"kept {len(kept)} ratios of {baseline_path} that this run did not measure")
    baseline_path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {len(ratios)} ratios to {baseline_path} (tolerance {out['tolerance']})")


def write_ratios(ratios: list[Ratio], out_path: Path, sources: list[Path], stat: str) -> None:
    """Save this run's ratios (and records/s) as JSON."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "sources": [str(p) for p in sources],
        "statistic": stat,
        "ratios": {
            r.key: {
                "group": r.group,
                "subject": r.subject,
                "peer": r.peer,
                "params": r.params,
                "ratio": round(r.ratio, 4),
                "subject_records_per_s": round(r.subject_records_per_s),
                "peer_records_per_s": round(r.peer_records_per_s),
                "cpu_ratio": None if r.cpu_ratio is None else round(r.cpu_ratio, 4),
            }
            for r in ratios
        },
    }
    out_path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nratios written to {out_path}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        description="pykaf/peer speed ratios from pytest-benchmark JSON, and the regression check."
    )
    parser.add_argument("results", nargs="+", type=Path, help="pytest-benchmark JSON file(s)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", metavar="BASELINE", type=Path, help="compare with a baseline")
    mode.add_argument("--update", metavar="BASELINE", type=Path, help="write a new baseline")
    parser.add_argument(
        "--tolerance",
        type=float,
        help="with --update: the allowed relative drop (default: keep the baseline's)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --update: keep the baseline's ratios this run did not measure (its other "
        "benchmark files), replacing only those it did",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="with --check: do not fail when a baseline ratio is absent from the run",
    )
    parser.add_argument(
        "--stat",
        choices=STATISTICS,
        help="which round time per benchmark to compare: median (the default) or min, the "
        "fastest round; --check uses the baseline's, --update keeps it unless given",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"where to write the ratios ({DEFAULT_OUT})"
    )
    args = parser.parse_args(argv)
    if args.tolerance is not None and not 0 <= args.tolerance < 1:
        parser.error("--tolerance must be in [0, 1)")

    warnings: list[str] = []
    try:
        stat = choose_statistic(args.stat, args.check or args.update, must_exist=bool(args.check))
        runs = [
            compute_ratios(read_entries(path, warnings, stat), warnings) for path in args.results
        ]
        print_implementations(args.results)
        spread = None
        if len(runs) == 1:
            ratios = runs[0]
        else:
            ratios, spread = combine_runs(runs)
            print(f"medians over {len(runs)} runs")
        if ratios:
            print_ratios(ratios, stat)
        for line in dict.fromkeys(warnings):  # each once, in order
            print(f"warning: {line}")
        if not ratios:
            print("no ratio could be computed: no group has both a pykaf and a peer result")
        if spread:
            print_spread(spread)
        if ratios:
            write_ratios(ratios, args.out, args.results, stat)
        if args.update:
            if not ratios:
                print("not updating the baseline with no ratios")
                return 1
            update(
                ratios, args.update, args.tolerance, args.results, spread, stat, merge=args.merge
            )
        if args.check:
            return check(ratios, args.check, args.allow_missing)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
