"""benchmarks/sandbox_throughput.py never reports a speed for runs that failed.

Issue 11 (8): with 30/30 failed runs for one backend the script still printed 68x and "target
met". Here its summary is fed measured chunks with failures (the same dictionaries `measure`
returns) and must refuse a rate, a ratio and a verdict for them.
"""

from __future__ import annotations

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/sandbox_throughput.py")


def _chunk(runs: int, seconds: float, failures: int = 0, error: str | None = None) -> dict:
    return {"wall_s": seconds, "latencies": [seconds / runs] * runs, "failures": failures, "first_error": error}


def test_failed_runs_get_no_rate_ratio_or_verdict(bench):
    raw = {
        "sympy": {
            "naive": [_chunk(8, 16.0)],
            "naive-min": [_chunk(8, 12.0)],
            "bwrap": [_chunk(30, 1.5)],
            "process": [_chunk(30, 0.4, failures=30, error="exit 1: ModuleNotFoundError: No module named 'sympy'")],
        }
    }
    rows = {row["mode"]: row for row in bench.summarize(raw)}
    assert rows["process"]["runs_per_s"] is None and rows["process"]["speedup_vs_naive"] is None
    assert rows["process"]["failures"] == 30 and "sympy" in rows["process"]["first_error"]
    assert rows["bwrap"]["runs_per_s"] == pytest.approx(20.0) and rows["bwrap"]["speedup_vs_naive"] == pytest.approx(40.0)
    verdict = bench.verdicts(list(rows.values()))
    assert verdict["sympy/process"]["met"] is None and verdict["sympy/process"]["speedup_vs_fastest_naive"] is None
    assert verdict["sympy/bwrap"]["met"] is True
    table = "\n".join(bench.format_table(list(rows.values())))
    process_line = next(line for line in table.splitlines() if " process " in line)
    assert "FAILED 30/30" in process_line and "x" not in process_line.split("runs:")[0].split("FAILED")[0]


def test_a_single_failure_is_enough_and_a_failed_baseline_voids_every_ratio(bench):
    raw = {
        "trivial": {
            "naive": [_chunk(100, 10.0), _chunk(100, 10.0, failures=1, error="exit 1: boom")],
            "naive-min": [_chunk(200, 8.0)],
            "bwrap": [_chunk(600, 3.0)],
        }
    }
    rows = {row["mode"]: row for row in bench.summarize(raw)}
    assert rows["naive"]["runs_per_s"] is None
    assert rows["bwrap"]["runs_per_s"] == pytest.approx(200.0)
    assert rows["bwrap"]["speedup_vs_naive"] is None and rows["bwrap"]["speedup_vs_naive_min"] == pytest.approx(8.0)
    assert bench.verdicts(list(rows.values()))["trivial/bwrap"]["met"] is None
