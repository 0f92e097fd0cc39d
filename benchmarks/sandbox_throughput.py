"""Throughput and latency of the sandbox backends against the naive way, side by side.

The naive way is what the peers do: a fresh ``python main.py`` subprocess per run (no
isolation). Every backend that works here is measured with its warm pool, fully isolated, on
two programs: a trivial one and one that imports sympy. Modes are interleaved in rounds, so
drift in machine speed (this box is shared) hits them all alike; ratios are what to quote.

    python benchmarks/sandbox_throughput.py            # full run
    python benchmarks/sandbox_throughput.py --quick    # a smoke-sized run

Prints a table and writes benchmarks/results/sandbox_throughput.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sandboxes
from sandboxes import Limits, SandboxUnavailable

WORKLOADS = {
    "trivial": "print(sum(range(100)))\n",
    "sympy": "import sympy\nx = sympy.Symbol('x')\nprint(sympy.factor(x**2 - 1))\n",
}
EXPECTED = {"trivial": "4950\n", "sympy": "(x - 1)*(x + 1)\n"}
TARGETS = {"trivial": 3.0, "sympy": 5.0}  # required speed-up of the warm isolated pool over naive
LIMITS = Limits(time_s=30)


# The fastest fresh interpreter we can make: no site processing (this dev venv's .pth hooks
# cost ~35 ms per start), the installed packages put on the path by hand.
_MIN_BOOT = (
    "import sys; sys.path[:0] = %r; "
    "exec(compile(open('main.py').read(), 'main.py', 'exec'), {'__name__': '__main__'})"
    % [p for p in sys.path if p.endswith("site-packages")]
)


def naive_runner(minimal: bool = False) -> Callable[[str], tuple[bool, float]]:
    """A fresh interpreter per run, as peers do (`subprocess.run([python, file])` in a temp dir).

    `minimal`: start it with ``-I -S`` (no site hooks) instead: a stricter baseline.
    """

    def run(source: str) -> tuple[bool, float]:
        start = time.perf_counter()
        directory = tempfile.mkdtemp(prefix="naive-")
        try:
            path = os.path.join(directory, "main.py")
            with open(path, "w") as fh:
                fh.write(source)
            argv = [sys.executable, "-I", "-S", "-c", _MIN_BOOT] if minimal else [sys.executable, path]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=directory)
            ok = proc.returncode == 0
            out = proc.stdout
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return ok and out == EXPECTED_BY_SOURCE[source], time.perf_counter() - start

    return run


EXPECTED_BY_SOURCE = {WORKLOADS[name]: EXPECTED[name] for name in WORKLOADS}


def sandbox_runner(sandbox) -> Callable[[str], tuple[bool, float]]:
    def run(source: str) -> tuple[bool, float]:
        start = time.perf_counter()
        res = sandbox.run(source, limits=LIMITS)
        return res.ok and res.stdout == EXPECTED_BY_SOURCE[source], time.perf_counter() - start

    return run


def measure(run: Callable[[str], tuple[bool, float]], source: str, count: int, concurrency: int) -> dict:
    """`count` runs with `concurrency` callers; wall time, per-run latencies, failures."""
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(pool.map(lambda _: run(source), range(count)))
    return {"wall_s": time.perf_counter() - start, "latencies": [lat for _, lat in outcomes], "failures": sum(1 for ok, _ in outcomes if not ok)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few runs: a smoke test of the script")
    parser.add_argument("--concurrency", type=int, default=2 * (os.cpu_count() or 1), help="concurrent callers and pool size")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per workload")
    parser.add_argument("--backends", default="docker,bwrap,process", help="comma-separated backends to try")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "sandbox_throughput.json"))
    args = parser.parse_args()
    counts = {"trivial": 60, "sympy": 30} if args.quick else {"trivial": 600, "sympy": 120}
    naive_counts = {"trivial": 60, "sympy": 8} if args.quick else {"trivial": 300, "sympy": 30}
    rounds = 1 if args.quick else args.rounds

    runners: dict[str, Callable[[str], tuple[bool, float]]] = {"naive": naive_runner(), "naive-min": naive_runner(True)}
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
        descriptions[backend] = sandbox.describe()

    load_before = os.getloadavg()
    raw: dict[str, dict[str, list[dict]]] = {w: {m: [] for m in runners} for w in WORKLOADS}
    try:
        for workload, source in WORKLOADS.items():
            for name, run in runners.items():  # warm-up: caches, lazy imports, first forks
                measure(run, source, 2 if name.startswith("naive") else 2 * args.concurrency, args.concurrency)
            for _ in range(rounds):
                for name, run in runners.items():
                    per_round = (naive_counts if name.startswith("naive") else counts)[workload] // rounds
                    raw[workload][name].append(measure(run, source, max(1, per_round), args.concurrency))
    finally:
        for sandbox in opened:
            sandbox.close()

    results = []
    for workload in WORKLOADS:
        naive_rate = None
        for name in sorted(runners, key=lambda n: n != "naive"):
            chunks = raw[workload][name]
            runs = sum(len(c["latencies"]) for c in chunks)
            wall = sum(c["wall_s"] for c in chunks)
            latencies = [lat for c in chunks for lat in c["latencies"]]
            rate = runs / wall
            if name == "naive":
                naive_rate = rate
            results.append(
                {
                    "workload": workload,
                    "mode": name,
                    "runs": runs,
                    "failures": sum(c["failures"] for c in chunks),
                    "runs_per_s": rate,
                    "p50_ms": 1000 * statistics.median(latencies),
                    "p95_ms": 1000 * percentile(latencies, 0.95),
                    "speedup_vs_naive": rate / naive_rate if naive_rate else None,
                }
            )
        minimal = next(r for r in results if r["workload"] == workload and r["mode"] == "naive-min")
        for row in results:
            if row["workload"] == workload:
                row["speedup_vs_naive_min"] = row["runs_per_s"] / minimal["runs_per_s"]

    header = (
        f"{'workload':<9} {'mode':<10} {'runs':>5} {'fail':>4} {'runs/s':>8} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'x naive':>8} {'x naive-min':>11}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row['workload']:<9} {row['mode']:<10} {row['runs']:>5} {row['failures']:>4} {row['runs_per_s']:>8.1f} "
            f"{row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} {row['speedup_vs_naive']:>7.2f}x {row['speedup_vs_naive_min']:>10.2f}x"
        )
    verdicts = {}
    for workload, target in TARGETS.items():
        for row in results:
            if row["workload"] != workload or row["mode"] not in ("bwrap", "docker", "process"):
                continue
            # Judged against the faster of the two fresh-interpreter baselines.
            speedup = min(row["speedup_vs_naive"], row["speedup_vs_naive_min"])
            met = speedup >= target
            verdicts[f"{workload}/{row['mode']}"] = {"speedup_vs_fastest_naive": speedup, "target": target, "met": met}
            print(f"target {workload} on {row['mode']}: >= {target:g}x the faster naive way; reached {speedup:.2f}x -> {'met' if met else 'NOT met'}")
    for backend, reason in skipped.items():
        print(f"skipped {backend}: {reason.splitlines()[0][:200]}")

    report = {
        "benchmark": "sandbox_throughput",
        "quick": args.quick,
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
        "targets": verdicts,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
