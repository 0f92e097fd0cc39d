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


def test_cpu_per_run_leaves_out_unmeasured_chunks_and_is_judged_against_naive_min(bench):
    # Issue 35 (2): CPU per run side by side. A chunk whose workers changed has cpu_s None and
    # must not count; the CPU target is naive-min's CPU per run over the sandbox's.
    def timed(runs, seconds, cpu_s):
        return {**_chunk(runs, seconds), "cpu_s": cpu_s, "host_cpu_s": runs * 0.0005}

    raw = {
        "trivial": {
            "naive-min": [timed(100, 5.0, 1.2), timed(100, 5.0, 1.0)],  # 11 ms per run
            "bwrap": [timed(300, 1.0, 0.6), timed(300, 1.0, None)],  # 2 ms per run, from 300 runs
            "process": [timed(300, 1.0, 0.9)],  # 3 ms per run
        }
    }
    rows = {row["mode"]: row for row in bench.summarize(raw)}
    assert rows["naive-min"]["cpu_ms"] == pytest.approx(11.0)
    assert rows["bwrap"]["cpu_ms"] == pytest.approx(2.0) and rows["bwrap"]["cpu_runs"] == 300
    assert rows["bwrap"]["host_cpu_ms"] == pytest.approx(0.5)
    assert rows["bwrap"]["cpu_x_naive_min"] == pytest.approx(5.5)
    assert rows["process"]["cpu_x_naive_min"] == pytest.approx(11 / 3)
    verdict = bench.verdicts(list(rows.values()))
    assert verdict["trivial/bwrap/cpu"]["met"] is True and verdict["trivial/process/cpu"]["met"] is False
    table = "\n".join(bench.format_table(list(rows.values())))
    assert "5.50x" in table and "2.00" in table


def test_no_cpu_figure_when_no_chunk_was_measured(bench):
    raw = {"trivial": {"naive-min": [_chunk(10, 1.0)], "bwrap": [{**_chunk(30, 1.0), "cpu_s": None}]}}
    rows = {row["mode"]: row for row in bench.summarize(raw)}
    assert rows["bwrap"]["cpu_ms"] is None and rows["bwrap"]["cpu_x_naive_min"] is None
    assert bench.verdicts(list(rows.values()))["trivial/bwrap/cpu"]["met"] is None


def test_the_fork_floor_script_measures_what_it_says():
    """benchmarks/fork_floor.py: the ballast shows in the child interpreter's anonymous memory,
    and both forks are measured (a positive CPU per fork, a child's faults counted)."""
    floor = load_script("benchmarks/fork_floor.py")
    small, large = floor.measure(0, 50, "libc"), floor.measure(8, 50, "os")
    assert large["anonymous_kib"] - small["anonymous_kib"] >= 8 * 1024 - 256
    for row in (small, large):
        assert row["ms_per_fork"] > 0 and row["child_faults"] > 0


def test_run_faults_sorts_a_fault_by_the_mapping_it_falls_in():
    faults = load_script("benchmarks/run_faults.py")
    libpython = "/usr/lib/libpython3.11.so.1.0"
    assert faults._kind("r-xp", libpython, 7, 7) == "code: libpython (instruction fetch)"
    assert faults._kind("r-xp", libpython, 7, 9) == "code: libpython (data read)"
    assert faults._kind("rw-p", libpython, 7, 9) == "writable data: libpython"
    assert faults._kind("r--p", "/usr/lib/x86_64-linux-gnu/libc.so.6", 7, 9) == "read-only data: other files"
    assert faults._kind("rw-p", "[heap]", 7, 9) == "heap"
    assert faults._kind("rw-p", "[stack]", 7, 9) == "stack"
    assert faults._kind("rw-p", "", 7, 9) == "anonymous (object arenas, other mmaps)"
    assert faults._kind("r-xp", "[vdso]", 7, 7) == "other ([vdso])"
