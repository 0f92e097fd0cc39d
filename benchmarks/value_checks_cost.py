"""What one run graded by value costs (``sandboxes.run_value_checks``), this tree's driver side by
side with another commit's.

The Coder–Tester catch reward grades its wrong programs by value (the default
``catch_runs="by_value"``): each tester step makes one run of the golden solution and the
problem's mutants on the tester's tests (a later step's extra cost over the paper's reward), and
a problem's first step also makes one run of the mutant candidates on the golden tests (the
choice of its mutants). Each program of such a run is a process forked from the run's process,
so what that process does after its fork is most of the run's cost. This script builds both
runs for HumanEval problems as the environment makes them (the reference tester's tests; the
candidates of the first wave of the choice), grades each with this tree's harness and with
``--baseline-driver``'s (``sandboxes/harness.py`` with its driver and codec, from git),
alternating run by run on one warm sandbox so that a change in the machine's load hits both
alike, and prints per run kind:

* the CPU of a run over every process of the sandbox's workers and this one
  (``harness_cost._tree_cpu``), median over the problems of each problem's median;
* this tree's over the baseline's: the median of the per-problem ratios and the ratio of the
  sums;
* whether both gave the same verdicts on every problem (each wrong program caught or not; each
  candidate that both runs started a wrong program or not).

    python benchmarks/value_checks_cost.py --baseline-driver 610d5ab
    python benchmarks/value_checks_cost.py --baseline-driver 610d5ab --problems 12 --rounds 3

Results: a table, and JSON in ``benchmarks/results/value_checks_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "value_checks_cost.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_cost import _tree_cpu, load_driver_harness  # noqa: E402


def gradings(env: Any, index: int) -> dict[str, Any]:
    """Problem ``index``'s two by-value gradings, as ``{kind: Grading}``: ``"tester's tests"``
    (the golden and its mutants on the reference tester's tests, as a tester step makes it) and
    ``"choice"`` (the first wave of mutant candidates on the golden tests, as the first step of
    the problem makes it); either is missing where the problem has none."""
    from llm_envs.envs.coder_tester import mutants
    from llm_envs.verifiers import code as code_verifier

    env.reset(seed=0, options={"problem_index": index})
    problem, cfg = env.problem, env.config
    found: dict[str, Any] = {}
    tests = code_verifier.parse_function_tests(
        env.reference_action("tester"), problem.entry_point, max_tests=cfg.max_generated_tests
    ).tests
    by_value = env._grading_by_value(tests)
    if by_value is not None:
        found["tester's tests"] = by_value
    if env._value_checks(env.golden_tests) is not None:
        candidates = list(
            mutants.iter_mutant_candidates(
                problem.solution, functions_only=True, key=str(problem.id), limit=cfg.max_mutant_candidates
            )
        )[: 2 * cfg.max_mutants]
        if candidates:
            found["choice"] = env._choice_grading_by_value(candidates, cfg.max_mutants)
    return found


def grade(harness: Any, sandbox: Any, grading: Any) -> list[Any]:
    """``grading`` (a ``"function_values"`` Grading) graded with ``harness``'s
    ``run_value_checks``: what the environment reads from each program's result. With a golden
    (a tester step): whether each other program was caught (``mutants.caught_by_values``);
    without (the choice): whether each candidate is a wrong program (``mutants.wrong_by_values``),
    ``"skipped"`` where the run did not start it. ``None``: not established. (The outcomes
    themselves may differ in length from run to run: a program stops at its first catch only if
    the golden had ended when it started.)"""
    from llm_envs.envs.coder_tester import mutants

    results = harness.run_value_checks(sandbox, grading.programs, list(grading.tests), **grading.value_checks_arguments())
    checks = len(grading.tests)
    if grading.golden is None:
        return ["skipped" if r is not None and r.skipped else mutants.wrong_by_values(r, checks) for r in results]
    golden = results[grading.golden]
    passing = [i for i, outcome in enumerate(golden.outcomes) if outcome == "pass"] if golden is not None else []
    return [
        mutants.caught_by_values(r, passing, checks) for i, r in enumerate(results) if i != grading.golden
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-driver", required=True, help="the commit whose harness and driver to compare with")
    parser.add_argument("--problems", type=int, default=24, help="HumanEval problems (spread over the 164)")
    parser.add_argument("--rounds", type=int, default=6, help="runs of each grading with each driver (after one warm-up)")
    parser.add_argument("--backend", default="bwrap", help="sandbox backend (default bwrap)")
    args = parser.parse_args()

    os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="value-checks-cost-")
    import sandboxes
    from llm_envs.envs.coder_tester.env import CoderTesterEnv
    from sandboxes import harness as this_harness

    harnesses = {"this tree": this_harness, args.baseline_driver: load_driver_harness(args.baseline_driver)}
    sandbox = sandboxes.make_sandbox(args.backend)
    env = CoderTesterEnv(split="test", task_kwargs={"split_policy": "benchmark"}, sandbox=sandbox, max_turns=1)
    step = max(1, 164 // args.problems)
    indices = list(range(0, 164, step))[: args.problems]
    cpu: dict[str, dict[str, list[float]]] = {}  # kind -> harness -> per-problem median CPU ms
    programs: dict[str, list[int]] = {}
    differences: list[dict[str, Any]] = []
    loads = [os.getloadavg()[0]]
    try:
        for index in indices:
            for kind, grading in gradings(env, index).items():
                samples: dict[str, list[float]] = {name: [] for name in harnesses}
                outcomes: dict[str, Any] = {}
                for round_ in range(args.rounds + 1):
                    order = list(harnesses) if round_ % 2 else list(reversed(harnesses))
                    for name in order:
                        tops, before = _tree_cpu(sandbox)
                        got = grade(harnesses[name], sandbox, grading)
                        tops_after, after = _tree_cpu(sandbox, host_first=True)
                        outcomes.setdefault(name, got)
                        if round_ and tops == tops_after:
                            samples[name].append((after - before) * 1000)
                first, second = (outcomes[name] for name in harnesses)
                # With `enough`, which candidates start before that many wrong ones have ended
                # depends on timing: only those both runs judged are compared.
                if any(a != b and "skipped" not in (a, b) for a, b in zip(first, second)):
                    differences.append({"problem": index, "kind": kind, "outcomes": [first, second]})
                if all(samples.values()):
                    for name, values in samples.items():
                        cpu.setdefault(kind, {}).setdefault(name, []).append(statistics.median(values))
                    programs.setdefault(kind, []).append(len(grading.programs))
            loads.append(os.getloadavg()[0])
    finally:
        sandbox.close()

    this, that = list(harnesses)
    rows = []
    print(f"{len(indices)} HumanEval problems, backend {args.backend}, {args.rounds} rounds; load average (1 min) "
          f"{min(loads):.1f}-{max(loads):.1f}; the same verdicts on every problem: {not differences}")
    print(f"{'run':<16}{'problems':>9}{'programs':>9}{'CPU ms, ' + this:>20}{'CPU ms, ' + that:>20}"
          f"{'ratio (median)':>16}{'ratio (sums)':>14}")
    for kind, by_harness in cpu.items():
        mine, theirs = by_harness[this], by_harness[that]
        ratio = statistics.median(a / b for a, b in zip(mine, theirs) if b > 0)
        sums = sum(mine) / sum(theirs)
        row = {"run": kind, "problems": len(mine), "programs_median": statistics.median(programs[kind]),
               "cpu_ms_median": {this: statistics.median(mine), that: statistics.median(theirs)},
               "ratio_median": ratio, "ratio_of_sums": sums}
        rows.append(row)
        print(f"{kind:<16}{len(mine):>9}{statistics.median(programs[kind]):>9g}{statistics.median(mine):>20.1f}"
              f"{statistics.median(theirs):>20.1f}{ratio:>16.3f}{sums:>14.3f}")
    for difference in differences:
        print(f"  differs: problem {difference['problem']} ({difference['kind']})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "baseline_driver": args.baseline_driver, "backend": args.backend, "problems": indices,
        "rounds": args.rounds, "rows": rows, "differences": differences, "load_average_1min": loads,
        "machine": platform.platform(),
    }, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
