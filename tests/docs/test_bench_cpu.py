"""bench/: the client CPU meter, and the CPU ratio bench/ratios.py prints beside the speedup."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

from tool_loader import load

ROOT = Path(__file__).resolve().parents[2]


class FakeBenchmark:
    def __init__(self) -> None:
        self.extra_info: dict[str, Any] = {}


def test_cpu_meter_counts_cpu_not_sleep() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        support = load("bench_support_under_test", ROOT / "bench" / "_support.py")
    finally:
        sys.path.remove(str(ROOT))
    meter = support.CpuMeter()

    def spin() -> None:
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass

    meter.run(spin)
    meter.run(lambda: time.sleep(0.05))
    busy, idle = meter.seconds
    assert busy >= 0.05 and idle < busy
    bench = FakeBenchmark()
    meter.note(bench, 1000)
    assert bench.extra_info["cpu_s_per_M"] == round((busy + idle) / 2 / 1000 * 1e6, 3)


def test_ratios_pair_cpu_beside_speed(tmp_path: Path) -> None:
    ratios = load("ratios_under_test", ROOT / "bench" / "ratios.py")

    def entry(client: str, seconds: float, cpu: float | None) -> dict[str, Any]:
        info: dict[str, Any] = {"client": client, "records": 1000, "params": ""}
        if cpu is not None:
            info["cpu_s_per_M"] = cpu
        return {"name": client, "group": "g", "stats": {"median": seconds}, "extra_info": info}

    results = tmp_path / "r.json"
    results.write_text(
        json.dumps(
            {
                "benchmarks": [
                    entry("pykaf", 1.0, 2.0),
                    entry("confluent-kafka", 1.5, 5.0),
                    entry("aiokafka", 3.0, None),
                ]
            }
        )
    )
    warnings: list[str] = []
    found = ratios.compute_ratios(ratios.read_entries(results, warnings), warnings)
    by_peer = {r.peer: r for r in found}
    assert by_peer["confluent-kafka"].ratio == 1.5
    assert by_peer["confluent-kafka"].cpu_ratio == 2.5
    assert by_peer["aiokafka"].cpu_ratio is None  # not noted for the peer: no figure


def test_a_floor_gives_the_ratio_of_what_each_client_adds(tmp_path: Path) -> None:
    ratios = load("ratios_under_test", ROOT / "bench" / "ratios.py")

    def entry(client: str, seconds: float) -> dict[str, Any]:
        info = {"client": client, "records": 1000, "params": "", "floor_s": 2.0}
        return {"name": client, "group": "g", "stats": {"median": seconds}, "extra_info": info}

    results = tmp_path / "r.json"
    results.write_text(
        json.dumps({"benchmarks": [entry("pykaf", 3.0), entry("confluent-kafka", 4.0)]})
    )
    warnings: list[str] = []
    found = ratios.compute_ratios(ratios.read_entries(results, warnings), warnings)
    by_group = {r.group: r.ratio for r in found}
    # the whole job: 4/3; what each adds to the 2 s no client can shorten: 2/1
    assert by_group == {"g": 4.0 / 3.0, "g:added": 2.0}
    assert warnings == []
    # a time at or under the floor cannot be divided out: said, and left out
    results.write_text(
        json.dumps({"benchmarks": [entry("pykaf", 2.0), entry("confluent-kafka", 4.0)]})
    )
    ratios.read_entries(results, warnings)
    assert warnings == ["g:added: pykaf took 2.0 s, not more than the floor"]


def _results(path: Path, times: dict[tuple[str, str], float]) -> Path:
    """A pytest-benchmark file: ``times[(group, client)]`` seconds per 1,000 records."""
    path.write_text(
        json.dumps(
            {
                "benchmarks": [
                    {
                        "name": f"{group}-{client}",
                        "group": group,
                        "stats": {"median": seconds},
                        "extra_info": {"client": client, "records": 1000, "params": ""},
                    }
                    for (group, client), seconds in times.items()
                ]
            }
        )
    )
    return path


def test_update_with_merge_keeps_the_ratios_the_run_did_not_measure(tmp_path: Path) -> None:
    ratios = load("ratios_merge_under_test", ROOT / "bench" / "ratios.py")
    baseline = tmp_path / "baseline.json"
    first = _results(
        tmp_path / "a.json",
        {
            ("codec", "pykaf"): 1.0,
            ("codec", "aiokafka"): 2.0,
            ("produce", "pykaf"): 1.0,
            ("produce", "confluent-kafka"): 3.0,
        },
    )
    out = tmp_path / "ratios.json"
    assert ratios.main([str(first), "--update", str(baseline), "--out", str(out)]) == 0
    assert json.loads(baseline.read_text())["ratios"] == {
        "codec | pykaf | aiokafka": 2.0,
        "produce | pykaf | confluent-kafka": 3.0,
    }
    # The spread measured over earlier runs (written by a run of several files).
    variation = {"runs": 9, "worst_drop_below_median": 0.1}
    kept = json.loads(baseline.read_text())
    baseline.write_text(json.dumps({**kept, "observed_variation": variation}))
    # A run of the producer benchmarks only: merged, the codec ratio stays.
    run = _results(
        tmp_path / "b.json", {("produce", "pykaf"): 1.0, ("produce", "confluent-kafka"): 4.0}
    )
    assert ratios.main([str(run), "--update", str(baseline), "--merge", "--out", str(out)]) == 0
    merged = json.loads(baseline.read_text())
    assert merged["ratios"] == {
        "codec | pykaf | aiokafka": 2.0,
        "produce | pykaf | confluent-kafka": 4.0,
    }
    assert str(run) in merged["sources"] and str(first) in merged["sources"]
    assert merged["observed_variation"] == variation  # one run measures no spread
    # Without --merge the baseline is the run's ratios only.
    assert ratios.main([str(run), "--update", str(baseline), "--out", str(out)]) == 0
    assert json.loads(baseline.read_text())["ratios"] == {"produce | pykaf | confluent-kafka": 4.0}


def test_latency_percentile_is_the_nearest_rank() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        latency = importlib.import_module("bench.test_latency")
    finally:
        sys.path.remove(str(ROOT))
    samples = [float(i) for i in range(100, 0, -1)]  # 1..100, unsorted
    assert latency.percentile(samples, 0.5) == 50.0
    assert latency.percentile(samples, 0.99) == 99.0
    assert latency.percentile(samples, 0.999) == 100.0
    assert latency.percentile([7.0], 0.99) == 7.0
