"""What choosing a problem's mutants costs, by the time limit of a golden test during the choice.

The Coder–Tester catch reward chooses each problem's mutants once (the first tester step of the
problem anywhere; then they are cached in memory and on disk): candidates run on the golden
tests until ``max_mutants`` fail one. A candidate that times out is never chosen, but it costs
the whole limit, and some problems have many candidates that loop for ever (a negated loop
condition, a step of the wrong sign). This script chooses the mutants of every HumanEval problem
with nothing cached, once with the limit of a test during the choice equal to ``test_time_s``
(5 s, as before ``mutant_test_time_s``) and once with ``mutant_test_time_s`` (1 s by default),
problem by problem on one warm sandbox (the two alternate, so a change in the machine's load
hits both alike), and prints:

* the wall time and CPU (every process of the sandbox's workers plus this one,
  ``harness_cost._tree_cpu``) of a choice, median, mean and total over the problems;
* how many problems have a candidate that timed out, and how many candidates did;
* on how many problems the two limits chose different mutants (a candidate that fails a golden
  test after running longer than the shorter limit is chosen only under the longer one).

    python benchmarks/mutant_choice.py                 # all 164 problems (~5 min)
    python benchmarks/mutant_choice.py --problems 40   # spread over the 164
    python benchmarks/mutant_choice.py --limits 5 1 0.5

Results: a table, and JSON in ``benchmarks/results/mutant_choice.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "mutant_choice.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_cost import _tree_cpu  # noqa: E402


def timed_out_candidates(results: Any) -> int:
    """How many of a choice run's programs timed out on a golden test (by value: a
    ``ValueCheckResult`` with a ``"timeout"`` outcome; one run per program: a ``TestReport``
    with a timed-out test)."""
    count = 0
    for result in results:
        outcomes = getattr(result, "outcomes", None)
        if outcomes is not None:
            count += "timeout" in outcomes
        elif getattr(result, "results", None) is not None:
            count += any(r.timed_out for r in result.results)
    return count


def choose(env: Any, index: int) -> dict[str, Any]:
    """Choose problem ``index``'s mutants with nothing cached: wall and CPU seconds, the
    candidates that timed out, and the mutants chosen."""
    from llm_envs.envs.coder_tester import mutants

    mutants.clear_cache()
    env.reset(seed=0, options={"problem_index": index})
    timeouts = 0
    grade = env._grade

    def counting(gradings: Any) -> Any:
        nonlocal timeouts
        results = grade(gradings)
        for result in results:
            timeouts += timed_out_candidates(result if isinstance(result, (list, tuple)) else [result])
        return results

    env._grade = counting
    try:
        tops, cpu_before = _tree_cpu(env.sandbox)
        started = time.perf_counter()
        chosen = env._mutants()
        wall = time.perf_counter() - started
        tops_after, cpu_after = _tree_cpu(env.sandbox, host_first=True)
    finally:
        del env._grade
    return {
        "wall_s": wall,
        "cpu_s": cpu_after - cpu_before if tops == tops_after else None,
        "timed_out": timeouts,
        "mutants": list(chosen),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=164, help="HumanEval problems (spread over the 164)")
    parser.add_argument("--backend", default="auto", help="sandbox backend (default auto)")
    parser.add_argument("--limits", type=float, nargs="+", default=None,
                        help="time limits of a golden test during the choice (default: test_time_s and "
                             "the default mutant_test_time_s)")
    args = parser.parse_args()

    os.environ["LLM_ENVS_MUTANT_CACHE"] = "off"  # nothing cached anywhere: every choice is a first
    os.environ["LLM_ENVS_SHIPPED_MUTANTS"] = "off"  # and none read from the package's table
    import sandboxes
    from llm_envs.envs.coder_tester.env import CoderTesterConfig, CoderTesterEnv

    defaults = CoderTesterConfig()
    limits = args.limits or [defaults.test_time_s, defaults.mutant_test_time_s]
    sandbox = sandboxes.make_sandbox(args.backend)
    common = dict(split="test", task_kwargs={"split_policy": "benchmark"}, sandbox=sandbox, max_turns=1)
    envs = {limit: CoderTesterEnv(mutant_test_time_s=limit, **common) for limit in limits}
    step = max(1, 164 // args.problems)
    indices = list(range(0, 164, step))[: args.problems]
    samples: dict[float, list[dict[str, Any]]] = {limit: [] for limit in limits}
    loads = [os.getloadavg()[0]]
    try:
        choose(envs[limits[0]], indices[0])  # warm the sandbox's workers
        for position, index in enumerate(indices):
            order = limits if position % 2 == 0 else limits[::-1]
            for limit in order:
                samples[limit].append({"problem": index, **choose(envs[limit], index)})
            loads.append(os.getloadavg()[0])
    finally:
        sandbox.close()

    first = limits[0]
    rows = []
    print(f"{len(indices)} HumanEval problems, backend {args.backend}, {platform.node()} "
          f"({os.cpu_count()} CPUs); load average (1 min) {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'limit s':>8}{'median ms':>11}{'mean ms':>10}{'max s':>8}{'total s':>9}{'CPU mean ms':>13}"
          f"{'CPU total s':>13}{'x wall':>8}{'x CPU':>7}{'problems':>10}{'timed out':>11}{'differ':>8}")
    base_wall = sum(s["wall_s"] for s in samples[first])
    for limit in limits:
        values = samples[limit]
        walls = [s["wall_s"] for s in values]
        cpus = [s["cpu_s"] for s in values if s["cpu_s"] is not None]
        differ = sum(a["mutants"] != b["mutants"] for a, b in zip(values, samples[first]))
        # CPU over the problems where both readings exist (none where a worker was replaced).
        pairs = [(a["cpu_s"], b["cpu_s"]) for a, b in zip(values, samples[first])
                 if a["cpu_s"] is not None and b["cpu_s"] is not None]
        row = {
            "limit_s": limit,
            "median_wall_ms": statistics.median(walls) * 1000,
            "mean_wall_ms": statistics.mean(walls) * 1000,
            "max_wall_s": max(walls),
            "total_wall_s": sum(walls),
            "mean_cpu_ms": statistics.mean(cpus) * 1000 if cpus else None,
            "total_cpu_s": sum(cpus) if cpus else None,
            "wall_ratio": sum(walls) / base_wall,
            "cpu_ratio": sum(a for a, _ in pairs) / sum(b for _, b in pairs) if pairs else None,
            "cpu_ratio_problems": len(pairs),
            "problems_with_a_timeout": sum(s["timed_out"] > 0 for s in values),
            "candidates_timed_out": sum(s["timed_out"] for s in values),
            "problems_choosing_other_mutants": differ,
            "slowest": sorted(((s["wall_s"], s["problem"]) for s in values), reverse=True)[:5],
        }
        rows.append(row)

        def show(value: float | None, spec: str) -> str:
            return "n/a" if value is None else format(value, spec)

        print(f"{limit:>8g}{row['median_wall_ms']:>11.0f}{row['mean_wall_ms']:>10.0f}{row['max_wall_s']:>8.1f}"
              f"{row['total_wall_s']:>9.1f}{show(row['mean_cpu_ms'], '.0f'):>13}{show(row['total_cpu_s'], '.1f'):>13}"
              f"{row['wall_ratio']:>7.2f}x{show(row['cpu_ratio'], '.2f'):>6}x{row['problems_with_a_timeout']:>10}"
              f"{row['candidates_timed_out']:>11}{differ:>8}")
    print("ratios against the first limit (CPU: over the problems with both readings); 'differ': problems whose "
          "chosen mutants differ from the first limit's")
    for row in rows:
        print(f"  slowest at {row['limit_s']:g} s: " + ", ".join(f"HumanEval/{p} {w:.1f} s" for w, p in row["slowest"]))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "backend": args.backend,
        "problems": indices,
        "load_average_1min": [min(loads), max(loads)],
        "rows": rows,
        "samples": {str(limit): [{k: v for k, v in s.items() if k != "mutants"} for s in samples[limit]]
                    for limit in limits},
    }, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
