"""Throughput and latency of the sandbox backends against the naive way, side by side.

The naive way is what the peers do: a fresh ``python main.py`` subprocess per run (no
isolation). Every backend that works here is measured with its warm pool, fully isolated, on
three programs: a trivial one, one that imports sympy and one that uses numpy (preloaded by the
heavy workers). Modes are interleaved in rounds, so
drift in machine speed (this box is shared) hits them all alike; ratios are what to quote.

    python benchmarks/sandbox_throughput.py            # full run
    python benchmarks/sandbox_throughput.py --quick    # a smoke-sized run
    python benchmarks/sandbox_throughput.py --workloads trivial --baseline-worker 5eda3a4
        # the trivial program only, and each local backend also with the worker of another
        # commit (mode "bwrap@5eda3a4"), side by side in the same rounds

Prints a table and writes benchmarks/results/sandbox_throughput.json. A mode with any failed run
(wrong output, non-zero exit, sandbox failure) gets no rate, no ratio and no verdict: its row says
FAILED with the count and the first failure, and the script exits with status 1.

Besides runs/s (wall clock, which a shared machine distorts), every mode's CPU per run is
measured side by side: for a sandbox, the user+system time of every process of its workers
(read from /proc: each live process's own time plus what its reaped children used, so each run's
processes count once; a chunk during which a worker was replaced is left out, since the CPU of a
process that is gone cannot be read); for the naive ways, the fresh interpreters' own time
(``RUSAGE_CHILDREN``). ``host ms`` is this process's CPU per run (spawning a subprocess, or the
pool's side of a sandboxed run), reported apart. ``cpu x naive-min`` is the ratio of CPU per run
that the issue-35 target (>= 5x on the trivial program) is judged on.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _proc import cpu_seconds, process_tree

import sandboxes
from sandboxes import Limits, SandboxUnavailable

WORKLOADS = {
    "trivial": "print(sum(range(100)))\n",
    "sympy": "import sympy\nx = sympy.Symbol('x')\nprint(sympy.factor(x**2 - 1))\n",
    # numpy is in the heavy workers' preload: what such a run costs is mostly the fork of a
    # zygote of ~55 MiB (the trivial program's zygote holds ~12 MiB).
    "numpy": "import numpy\nprint(numpy.arange(100).sum())\n",
}
EXPECTED = {"trivial": "4950\n", "sympy": "(x - 1)*(x + 1)\n", "numpy": "4950\n"}
TARGETS = {"trivial": 3.0, "sympy": 5.0}  # required speed-up of the warm isolated pool over naive
#: Required CPU ratio: naive-min's CPU per run over the sandbox's (all its processes), issue 35.
CPU_TARGETS = {"trivial": 5.0}
SANDBOX_MODES = ("bwrap", "docker", "process")
LIMITS = Limits(time_s=30)


# The fastest fresh interpreter we can make: no site processing (this dev venv's .pth hooks
# cost ~35 ms per start), the installed packages put on the path by hand.
_MIN_BOOT = (
    "import sys; sys.path[:0] = %r; "
    "exec(compile(open('main.py').read(), 'main.py', 'exec'), {'__name__': '__main__'})"
    % [p for p in sys.path if p.endswith("site-packages")]
)


Outcome = tuple[bool, float, str]  # (correct, latency in s, what went wrong if not correct)


def naive_runner(minimal: bool = False) -> Callable[[str], Outcome]:
    """A fresh interpreter per run, as peers do (`subprocess.run([python, file])` in a temp dir).

    `minimal`: start it with ``-I -S`` (no site hooks) instead: a stricter baseline.
    """

    def run(source: str) -> Outcome:
        start = time.perf_counter()
        directory = tempfile.mkdtemp(prefix="naive-")
        try:
            path = os.path.join(directory, "main.py")
            with open(path, "w") as fh:
                fh.write(source)
            argv = [sys.executable, "-I", "-S", "-c", _MIN_BOOT] if minimal else [sys.executable, path]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        elapsed = time.perf_counter() - start
        if proc.returncode == 0 and proc.stdout == EXPECTED_BY_SOURCE[source]:
            return True, elapsed, ""
        return False, elapsed, f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [proc.stdout[:80]])[-1][:200]}"

    return run


EXPECTED_BY_SOURCE = {WORKLOADS[name]: EXPECTED[name] for name in WORKLOADS}


def sandbox_runner(sandbox) -> Callable[[str], Outcome]:
    def run(source: str) -> Outcome:
        start = time.perf_counter()
        res = sandbox.run(source, limits=LIMITS)
        elapsed = time.perf_counter() - start
        if res.ok and res.stdout == EXPECTED_BY_SOURCE[source]:
            return True, elapsed, ""
        why = res.sandbox_error or (res.stderr.strip().splitlines() or [repr(res.stdout[:80])])[-1]
        return False, elapsed, f"exit {res.exit_code}{' timed out' if res.timed_out else ''}: {why[:200]}"

    return run



CpuProbe = Callable[[], tuple[object, float]]  # () -> (what was measured, CPU seconds so far)


def children_cpu() -> tuple[object, float]:
    """CPU seconds of this process's reaped children (the naive ways' interpreters)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return None, usage.ru_utime + usage.ru_stime


def sandbox_cpu(sandbox) -> CpuProbe:
    """A probe of the CPU seconds used so far by every process of the sandbox's workers, with
    the set of workers it covered (a chunk whose workers changed gets no CPU figure, nor does one
    of a sandbox whose workers have no host pid, such as docker's containers)."""

    def probe() -> tuple[object, float]:
        tops = frozenset(sandbox.worker_pids())
        if not tops:  # containers: no host pid to read (the chunk gets no CPU figure, not 0)
            return object(), 0.0
        return tops, cpu_seconds(process_tree(tops))

    return probe


def measure(run: Callable[[str], Outcome], source: str, count: int, concurrency: int, cpu: CpuProbe | None = None) -> dict:
    """`count` runs with `concurrency` callers; wall time, per-run latencies, failures, and the CPU
    seconds of the runs' processes (``cpu_s``; None if `cpu` could not tell) and of this process."""
    cpu_before = cpu() if cpu else None
    host_before = time.process_time()
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(pool.map(lambda _: run(source), range(count)))
    wall = time.perf_counter() - start
    host = time.process_time() - host_before
    cpu_after = cpu() if cpu else None
    cpu_s = None
    if cpu_before is not None and cpu_after is not None and cpu_before[0] == cpu_after[0]:
        cpu_s = cpu_after[1] - cpu_before[1]
    errors = [why for ok, _, why in outcomes if not ok]
    return {
        "wall_s": wall,
        "latencies": [lat for _, lat, _ in outcomes],
        "failures": len(errors),
        "first_error": errors[0] if errors else None,
        "cpu_s": cpu_s,
        "host_cpu_s": host,
    }


def summarize(raw: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """One row per (workload, mode) from the measured chunks. A mode with any failed run gets
    no rate, latency or ratio (``None``): a speed of runs that did not work means nothing. Ratios
    of the other modes need the baselines of that workload to have worked too."""
    results = []
    for workload, modes in raw.items():
        rows = {}
        for name, chunks in modes.items():
            runs = sum(len(c["latencies"]) for c in chunks)
            failures = sum(c["failures"] for c in chunks)
            row = {"workload": workload, "mode": name, "runs": runs, "failures": failures}
            if failures or not runs:
                row.update(
                    runs_per_s=None,
                    p50_ms=None,
                    p95_ms=None,
                    cpu_ms=None,
                    host_cpu_ms=None,
                    first_error=next((c["first_error"] for c in chunks if c["first_error"]), "no runs"),
                )
            else:
                latencies = [lat for c in chunks for lat in c["latencies"]]
                timed = [c for c in chunks if c.get("cpu_s") is not None]
                timed_runs = sum(len(c["latencies"]) for c in timed)
                row.update(
                    runs_per_s=runs / sum(c["wall_s"] for c in chunks),
                    p50_ms=1000 * statistics.median(latencies),
                    p95_ms=1000 * percentile(latencies, 0.95),
                    cpu_ms=1000 * sum(c["cpu_s"] for c in timed) / timed_runs if timed_runs else None,
                    cpu_runs=timed_runs,
                    host_cpu_ms=1000 * sum(c.get("host_cpu_s", 0.0) for c in chunks) / runs,
                )
            rows[name] = row
        for row in rows.values():
            for key, baseline in (("speedup_vs_naive", "naive"), ("speedup_vs_naive_min", "naive-min")):
                base = rows.get(baseline, {}).get("runs_per_s")
                row[key] = row["runs_per_s"] / base if row["runs_per_s"] and base else None
            base_cpu = rows.get("naive-min", {}).get("cpu_ms")
            row["cpu_x_naive_min"] = base_cpu / row["cpu_ms"] if row["cpu_ms"] and base_cpu else None
        results += sorted(rows.values(), key=lambda r: (r["mode"] != "naive", r["mode"] != "naive-min"))
    return results


def verdicts(results: list[dict]) -> dict[str, dict]:
    """Each sandbox row against its target, judged against the faster of the two fresh-interpreter
    baselines; ``met`` is None (not measured) when the row or a baseline had failures."""
    out = {}
    for row in results:
        if row["mode"] not in SANDBOX_MODES or row["workload"] not in TARGETS:
            continue
        if row["workload"] in CPU_TARGETS:
            target = CPU_TARGETS[row["workload"]]
            ratio = row["cpu_x_naive_min"]
            out[f"{row['workload']}/{row['mode']}/cpu"] = {
                "cpu_x_naive_min": ratio,
                "target": target,
                "met": None if ratio is None else ratio >= target,
            }
        target = TARGETS[row["workload"]]
        ratios = (row["speedup_vs_naive"], row["speedup_vs_naive_min"])
        if None in ratios:
            out[f"{row['workload']}/{row['mode']}"] = {"speedup_vs_fastest_naive": None, "target": target, "met": None}
        else:
            speedup = min(ratios)
            out[f"{row['workload']}/{row['mode']}"] = {"speedup_vs_fastest_naive": speedup, "target": target, "met": speedup >= target}
    return out


def format_table(results: list[dict]) -> list[str]:
    header = (
        f"{'workload':<9} {'mode':<16} {'runs':>5} {'fail':>4} {'runs/s':>8} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'x naive':>8} {'x naive-min':>11} {'cpu ms':>7} {'host ms':>7} {'cpu x naive-min':>15}"
    )
    lines = [header, "-" * len(header)]
    for row in results:
        head = f"{row['workload']:<9} {row['mode']:<16} {row['runs']:>5} {row['failures']:>4}"
        if row["runs_per_s"] is None:
            lines.append(f"{head} FAILED {row['failures']}/{row['runs']} runs: no rate reported ({row['first_error']})")
            continue
        ratio = lambda value, width: f"{value:>{width - 1}.2f}x" if value is not None else f"{'-':>{width}}"  # noqa: E731
        number = lambda value, width: f"{value:>{width}.2f}" if value is not None else f"{'-':>{width}}"  # noqa: E731
        lines.append(
            f"{head} {row['runs_per_s']:>8.1f} {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} "
            f"{ratio(row['speedup_vs_naive'], 8)} {ratio(row['speedup_vs_naive_min'], 11)} "
            f"{number(row.get('cpu_ms'), 7)} {number(row.get('host_cpu_ms'), 7)} {ratio(row.get('cpu_x_naive_min'), 15)}"
        )
    return lines


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _source_at(rev: str, path: str) -> str:
    """The text of the repository's file `path` at commit `rev`."""
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _worker_env_at(rev: str) -> dict[str, str]:
    """The environment the local backends started their workers with at commit `rev`
    (``_SCRUBBED_ENV`` of its ``sandboxes/local.py``)."""
    source = _source_at(rev, "sandboxes/local.py")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_SCRUBBED_ENV" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"no _SCRUBBED_ENV in sandboxes/local.py at {rev}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few runs: a smoke test of the script")
    parser.add_argument("--concurrency", type=int, default=2 * (os.cpu_count() or 1), help="concurrent callers and pool size")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per workload")
    parser.add_argument("--backends", default="docker,bwrap,process", help="comma-separated backends to try")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "sandbox_throughput.json"))
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated workloads to run")
    parser.add_argument(
        "--baseline-worker",
        metavar="REV",
        help="also run each local backend with sandboxes/_worker_main.py as of git revision REV (mode <backend>@REV)",
    )
    args = parser.parse_args()
    workloads = {name: WORKLOADS[name] for name in args.workloads.split(",")}
    counts = {"trivial": 60, "sympy": 30, "numpy": 30} if args.quick else {"trivial": 600, "sympy": 120, "numpy": 300}
    naive_counts = {"trivial": 60, "sympy": 8, "numpy": 10} if args.quick else {"trivial": 300, "sympy": 30, "numpy": 60}
    rounds = 1 if args.quick else args.rounds

    runners: dict[str, Callable[[str], Outcome]] = {"naive": naive_runner(), "naive-min": naive_runner(True)}
    probes: dict[str, CpuProbe] = {"naive": children_cpu, "naive-min": children_cpu}
    descriptions = {
        "naive": f"fresh `{sys.executable} main.py` subprocess per run, no isolation (the peers' way)",
        "naive-min": "fresh `python -I -S` per run (no site hooks), no isolation: the fastest fresh interpreter",
    }
    opened = []
    skipped = {}
    for backend in args.backends.split(","):
        try:
            sandbox = sandboxes.make_sandbox(backend, pool_size=args.concurrency)
        except SandboxUnavailable as exc:
            skipped[backend] = str(exc)
            continue
        sandbox.warm()  # start (and preload) every worker before timing
        opened.append(sandbox)
        runners[backend] = sandbox_runner(sandbox)
        probes[backend] = sandbox_cpu(sandbox)
        descriptions[backend] = sandbox.describe()
        if args.baseline_worker and hasattr(sandbox, "worker_source"):
            old_source = _source_at(args.baseline_worker, "sandboxes/_worker_main.py")
            baseline = sandboxes.make_sandbox(backend, pool_size=args.concurrency)
            baseline.worker_source = old_source  # this instance's workers run the old worker
            baseline.worker_env = _worker_env_at(args.baseline_worker)  # started as it was then
            baseline.warm()
            opened.append(baseline)
            mode = f"{backend}@{args.baseline_worker}"
            runners[mode] = sandbox_runner(baseline)
            probes[mode] = sandbox_cpu(baseline)
            descriptions[mode] = f"{backend} with the worker of {args.baseline_worker}"

    load_before = os.getloadavg()
    raw: dict[str, dict[str, list[dict]]] = {w: {m: [] for m in runners} for w in workloads}
    try:
        for workload, source in workloads.items():
            for name, run in runners.items():  # warm-up: caches, lazy imports, first forks
                measure(run, source, 2 if name.startswith("naive") else 2 * args.concurrency, args.concurrency)
            for _ in range(rounds):
                for name, run in runners.items():
                    per_round = (naive_counts if name.startswith("naive") else counts)[workload] // rounds
                    raw[workload][name].append(measure(run, source, max(1, per_round), args.concurrency, probes[name]))
    finally:
        for sandbox in opened:
            sandbox.close()

    results = summarize(raw)
    for line in format_table(results):
        print(line)
    verdict = verdicts(results)
    for key, item in verdict.items():
        workload, mode = key.split("/")[:2]
        if key.endswith("/cpu"):
            reached = "NOT MEASURED" if item["met"] is None else (
                f"reached {item['cpu_x_naive_min']:.2f}x -> {'met' if item['met'] else 'NOT met'}"
            )
            print(f"target {workload} on {mode}: CPU per run >= {item['target']:g}x less than naive-min; {reached}")
        elif item["met"] is None:
            print(f"target {workload} on {mode}: >= {item['target']:g}x the faster naive way; NOT MEASURED (failed runs)")
        else:
            print(
                f"target {workload} on {mode}: >= {item['target']:g}x the faster naive way; reached "
                f"{item['speedup_vs_fastest_naive']:.2f}x -> {'met' if item['met'] else 'NOT met'}"
            )
    for row in results:
        before = next(
            (r for r in results if r["workload"] == row["workload"] and r["mode"] == f"{row['mode']}@{args.baseline_worker}"),
            None,
        )
        if args.baseline_worker and before and row.get("cpu_ms") and before.get("cpu_ms"):
            print(
                f"{row['workload']} on {row['mode']}: CPU per run {row['cpu_ms']:.2f} ms against {before['cpu_ms']:.2f} ms "
                f"with the worker of {args.baseline_worker} ({row['cpu_ms'] / before['cpu_ms']:.2f}x)"
            )
    for backend, reason in skipped.items():
        print(f"skipped {backend}: {reason.splitlines()[0][:200]}")

    report = {
        "benchmark": "sandbox_throughput",
        "quick": args.quick,
        "baseline_worker": args.baseline_worker,
        "concurrency": args.concurrency,
        "rounds": rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
        "modes": descriptions,
        "skipped": skipped,
        "results": results,
        "targets": verdict,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    failed = [f"{r['workload']}/{r['mode']}" for r in results if r["failures"]]
    if failed:
        print(f"FAILED runs in {', '.join(failed)}: their speed is not reported", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
