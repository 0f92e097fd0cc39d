"""The sandbox cost of the Coder–Tester catch reward, side by side with the paper's reward.

Plays one reference turn (golden coder, golden tests as the tester) on HumanEval problems with
``tester_reward="paper"`` and with the default ``"catch"`` reward (wrong programs: mutants of the
golden solution), and reports the wall time of the tester's step and the sandbox runs it made:

* **catch, cold** (``catch_runs="per_program"``, one run per program): the first tester step of a problem anywhere (nothing cached, in memory or on
  disk), which also chooses the problem's mutants (up to ``max_mutant_candidates`` runs on the
  golden tests);
* **catch, from disk**: the first tester step of a problem in a new process, its mutants read
  from the disk cache that an earlier process wrote (``mutants.disk_cache_dir``): also the first
  step of a problem whose mutants were chosen before training (``env.prepare()``, ``llm-envs
  prepare``);
* **catch, warm**: a later tester step of the same problem (mutants cached in memory);
* **paper**: the golden solution and the coder's code on the tester's tests only;
* **by value, ...** (the default, ``catch_runs="by_value"``): the same catch reward with every
  wrong program graded by value in one run where the tests are asserts on the values of calls
  (``sandboxes.run_value_checks``): cold (its mutants chosen that way too), from the disk cache
  and warm;
* **by value, shipped**: the first step anywhere of a bundled problem (nothing cached in memory
  or on disk) whose choice ships with the package (``llm_envs.envs.coder_tester.shipped``; the
  other modes run with ``LLM_ENVS_SHIPPED_MUTANTS=off``);
* **one run, ...**: the same catch reward with ``catch_runs="one_run"`` (the guarded golden and
  every wrong program in one sandbox run, one slot each, a wrong program stopped at its first
  catch: ``sandboxes.harness.run_function_tests_slots``): cold (nothing cached, in memory or on
  disk: its mutants chosen one run per wave of candidates), from the disk cache and
  warm.

Modes alternate problem by problem on one warm sandbox, so load changes hit all of them alike.
Every step grades the tester's reply as new (as in training, where each is): nothing made from
its tests is cached (``llm_envs.verifiers.code.value_check``); and every step but a warm one
finds no program compiled (``sandboxes.harness``), as in a new process.
Besides the wall time of the step, the CPU it cost over every process of the sandbox's workers
and this one (``harness_cost._tree_cpu``; none where a worker was replaced meanwhile), as the
median step and as the mean over the problems (the workers' CPU comes in 10 ms clock ticks, so a
median of a few ticks moves by a tick between runs; the mean does not). Quote the
ratios; the machine is shared: the load average is printed and stored. Results: a table, and
JSON in ``benchmarks/results/tester_reward.json``.

    python benchmarks/tester_reward.py              # 24 problems
    python benchmarks/tester_reward.py --problems 6 # quicker
    python benchmarks/tester_reward.py --timing-channel  # why catch_runs="one_run" is opt-in
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "tester_reward.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_throughput import TimedSandbox  # noqa: E402
from harness_cost import _tree_cpu  # noqa: E402


def tester_step(env: Any, index: int) -> tuple[float, int, dict[str, Any], float | None]:
    """(seconds of the tester's step, sandbox runs it made, its record's info, CPU seconds)."""
    sandbox = env.sandbox
    env.reset(seed=0, options={"problem_index": index})
    env.step(env.reference_action("coder"))
    runs_before = sandbox.runs
    tops_before, cpu_before = _tree_cpu(sandbox.inner)
    started = time.perf_counter()
    env.step(env.reference_action("tester"))
    elapsed = time.perf_counter() - started
    tops_after, cpu_after = _tree_cpu(sandbox.inner)
    cpu = cpu_after - cpu_before if tops_after == tops_before else None
    return elapsed, sandbox.runs - runs_before, dict(env.records[1].info), cpu


def slot_cost(env: Any, index: int) -> dict[str, float]:
    """The one-run grading of problem ``index`` (its guarded golden and wrong programs on the
    golden tests as the tester writes them) made directly, beside one of its programs graded in
    a run of its own: wall and CPU milliseconds, and the slots' own wall times as the run's
    process measured them."""
    from llm_envs.verifiers import code as code_verifier
    from sandboxes.harness import run_function_tests, run_function_tests_slots

    sandbox = env.sandbox.inner
    env.reset(seed=0, options={"problem_index": index})
    problem = env.problem
    tests = code_verifier.parse_function_tests(
        env.reference_action("tester"), problem.entry_point, max_tests=env.config.max_generated_tests
    ).tests
    programs = [env._as_wrong_program(problem.solution)] + [env._as_wrong_program(m) for m in env._mutants()]
    common = dict(setup=problem.setup, entry_point=problem.entry_point, time_s=env.config.test_time_s)
    results: list[Any] = []
    tops, cpu_before = _tree_cpu(sandbox)
    started = time.perf_counter()
    results = run_function_tests_slots(sandbox, programs, list(tests), golden=0, **common)
    wall = time.perf_counter() - started
    tops_after, cpu_after = _tree_cpu(sandbox)
    cpu = cpu_after - cpu_before if tops == tops_after else float("nan")
    tops, cpu_before = _tree_cpu(sandbox)
    started = time.perf_counter()
    run_function_tests(sandbox, programs[0], list(tests), **common)
    alone_wall = time.perf_counter() - started
    tops_after, cpu_after = _tree_cpu(sandbox)
    alone_cpu = cpu_after - cpu_before if tops == tops_after else float("nan")
    seconds = [r.seconds for r in results if r.seconds is not None]
    stopped = [r for r in results[1:] if r.stopped_at is not None]
    return {
        "programs in the run": float(len(programs)),
        "one run: wall ms": wall * 1000,
        "one run: CPU ms": cpu * 1000,
        "one run: ms per slot (the run's own clock)": statistics.mean(seconds) * 1000 if seconds else float("nan"),
        "one run: ms per stopped slot": statistics.mean(r.seconds for r in stopped) * 1000 if stopped and all(r.seconds for r in stopped) else float("nan"),
        "wrong programs stopped early": float(len(stopped)),
        "a program in a run of its own: wall ms": alone_wall * 1000,
        "a program in a run of its own: CPU ms": alone_cpu * 1000,
    }


# A slot's test that reads, from the clock alone, how many earlier slots slept (their program's
# answer was odd), then sleeps if its own answer is odd: the channel that keeps catch_runs=
# "one_run" behind allow_reward_holes (docs/sandboxes.md).
_TIMING_TEST = """
import os, time
tick = os.sysconf('SC_CLK_TCK')
start = int(open('/proc/%d/stat' % os.getppid()).read().rsplit(')', 1)[1].split()[19]) / tick
now = float(open('/proc/uptime').read().split()[0])
earlier = round((now - start - 0.1) / 0.5)
if f(0) % 2:
    time.sleep(0.5)
assert False, earlier
"""


def timing_channel(backend: str, rounds: int = 3) -> None:
    """Show the timing channel between the slots of one run: each slot's test reports how many
    earlier slots' programs answered an odd number, read from elapsed time only."""
    import sandboxes
    from sandboxes.harness import run_function_tests_slots

    sandbox = sandboxes.make_sandbox(backend)
    answers = (1, 2, 3, 5, 4, 7)
    programs = [f"def f(x):\n    return {v}\n" for v in answers]
    right = 0
    try:
        for _ in range(rounds):
            slots = run_function_tests_slots(sandbox, programs, [_TIMING_TEST], entry_point="f", early_stop=False)
            odd, truth, read = 0, [], []
            for i in sorted(range(len(programs)), key=lambda i: slots[i].position):
                truth.append(odd)
                read.append(int(str(slots[i].report.results[0].error).rpartition(":")[2]))
                odd += answers[i] % 2
            right += truth == read
            print(f"odd answers before each slot {truth}, read from the clock {read}")
    finally:
        sandbox.close()
    print(f"{right} of {rounds} runs read every earlier slot's answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=24, help="HumanEval problems (spread over the 164)")
    parser.add_argument("--backend", default="auto", help="sandbox backend (default auto)")
    parser.add_argument("--timing-channel", action="store_true",
                        help="only show the timing channel between the slots of one run")
    args = parser.parse_args()
    if args.timing_channel:
        return timing_channel(args.backend)

    import os
    import tempfile

    import sandboxes
    from llm_envs.envs.coder_tester import mutants

    # A disk cache of this run's own: "cold" means nothing cached anywhere, and the shipped
    # choices unused (but in "by value, shipped").
    disk_cache = os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-mutants-")
    os.environ["LLM_ENVS_SHIPPED_MUTANTS"] = "off"
    from llm_envs.envs.coder_tester.env import CoderTesterEnv

    sandbox = TimedSandbox(sandboxes.make_sandbox(args.backend))
    common = dict(split="test", task_kwargs={"split_policy": "benchmark"}, sandbox=sandbox, max_turns=1)
    envs = {
        "paper": CoderTesterEnv(tester_reward="paper", **common),
        "catch": CoderTesterEnv(catch_runs="per_program", **common),
        "one run": CoderTesterEnv(catch_runs="one_run", allow_reward_holes=True, **common),
        "by value": CoderTesterEnv(catch_runs="by_value", **common),
    }
    step = max(1, 164 // args.problems)
    indices = list(range(0, 164, step))[: args.problems]
    mutants.clear_cache()
    tester_step(envs["paper"], indices[0])  # warm the sandbox's workers
    samples: dict[str, list[tuple[float, int, float | None]]] = {
        "paper": [],
        "catch, cold": [],
        "catch, from disk": [],
        "catch, warm": [],
        "one run, cold": [],
        "one run, from disk": [],
        "one run, warm": [],
        "by value, cold": [],
        "by value, from disk": [],
        "by value, warm": [],
        "by value, shipped": [],
    }
    shipped_differs: list[int] = []
    wrong_programs = []
    same_reward = True
    differences: list[dict[str, Any]] = []
    loads = [os.getloadavg()[0]]
    breakdown: list[dict[str, float]] = []

    from llm_envs.verifiers import code as code_verifier
    from sandboxes import harness

    def sample(mode: str, env: Any, index: int) -> dict[str, Any]:
        # Every step of a training run grades a new reply of the tester's: nothing made from its
        # tests is cached (the reference tester's reply is the same at every step here). The
        # first step of a problem in a process (all but warm) finds no program compiled either.
        code_verifier.value_check.cache_clear()
        if not mode.endswith("warm"):
            harness._compiled_once.cache_clear()
        seconds, runs, info, cpu = tester_step(env, index)
        samples[mode].append((seconds, runs, cpu))
        return info

    try:
        for index in indices:
            sample("paper", envs["paper"], index)
            info = sample("catch, cold", envs["catch"], index)
            wrong_programs.append(info.get("wrong_programs", 0))
            # Nothing cached for the one-run env either: a disk cache of its own for this step.
            mutants.clear_cache()
            os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-mutants-")
            one_cold = sample("one run, cold", envs["one run"], index)
            mutants.clear_cache()
            os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-mutants-")
            by_value_cold = sample("by value, cold", envs["by value"], index)
            os.environ["LLM_ENVS_MUTANT_CACHE"] = disk_cache
            mutants.clear_cache()  # a new process: the memory cache is empty, the disk one is not
            sample("catch, from disk", envs["catch"], index)
            mutants.clear_cache()
            one = sample("one run, from disk", envs["one run"], index)
            one_warm = sample("one run, warm", envs["one run"], index)
            mutants.clear_cache()
            by_value = sample("by value, from disk", envs["by value"], index)
            by_value_warm = sample("by value, warm", envs["by value"], index)
            # The first step anywhere of a bundled problem: nothing cached, its choice shipped.
            mutants.clear_cache()
            os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-mutants-")
            os.environ["LLM_ENVS_SHIPPED_MUTANTS"] = "on"
            by_value_shipped = sample("by value, shipped", envs["by value"], index)
            os.environ["LLM_ENVS_SHIPPED_MUTANTS"] = "off"
            os.environ["LLM_ENVS_MUTANT_CACHE"] = disk_cache
            mutants.clear_cache()
            warm = sample("catch, warm", envs["catch"], index)
            keys = ("golden_solution_pass_rate", "wrong_programs", "wrong_programs_caught")
            for mode, got in (("one run, cold", one_cold), ("one run, from disk", one), ("one run, warm", one_warm),
                              ("by value, cold", by_value_cold), ("by value, from disk", by_value),
                              ("by value, warm", by_value_warm)):
                if tuple(got[k] for k in keys) != tuple(warm[k] for k in keys):
                    same_reward = False
                    differences.append({"problem": index, "mode": mode, "got": [got[k] for k in keys],
                                        "one run per program": [warm[k] for k in keys]})
            # The shipped choice is the release machine's: it differs from this machine's where a
            # candidate runs close to the time limit of a golden test (docs/envs/coder_tester.md).
            if tuple(by_value_shipped[k] for k in keys) != tuple(by_value_warm[k] for k in keys):
                shipped_differs.append(index)
            loads.append(os.getloadavg()[0])
            breakdown.append(slot_cost(envs["one run"], index))
    finally:
        sandbox.inner.close()

    paper_median = statistics.median(s for s, _, _ in samples["paper"])
    paper_cpus = [c for _, _, c in samples["paper"] if c is not None]
    paper_cpu = statistics.median(paper_cpus) if paper_cpus else float("nan")
    # The workers' CPU is read from /proc in 10 ms clock ticks: a median of a few ticks moves by
    # a tick between runs, a mean over the problems does not.
    paper_mean_cpu = statistics.mean(paper_cpus) if paper_cpus else float("nan")
    rows = []
    print(f"{len(indices)} HumanEval problems, backend {args.backend}; wrong programs per problem: "
          f"median {statistics.median(wrong_programs):g}, min {min(wrong_programs)}; load average "
          f"(1 min) {min(loads):.1f}-{max(loads):.1f}; one run and by value paid what per-program runs paid: "
          f"{same_reward}; the shipped choice paid what this machine's paid on "
          f"{len(indices) - len(shipped_differs)} of {len(indices)} problems")
    for difference in differences:
        print(f"  differs: problem {difference['problem']}, {difference['mode']}: (golden pass rate, wrong programs, "
              f"caught) {difference['got']} against {difference['one run per program']}")
    print(f"{'mode':<22}{'median s':>10}{'p90 s':>9}{'runs/step':>11}{'x paper':>9}{'CPU ms':>9}{'x paper':>9}"
          f"{'mean CPU':>10}{'x paper':>9}")
    for mode, values in samples.items():
        times = sorted(s for s, _, _ in values)
        median = statistics.median(times)
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        runs = statistics.mean(r for _, r, _ in values)
        cpus = [c for _, _, c in values if c is not None]
        cpu = statistics.median(cpus) if cpus else float("nan")
        ratio = median / paper_median if paper_median > 0 else float("nan")
        cpu_ratio = cpu / paper_cpu if paper_cpu > 0 else float("nan")
        mean_cpu = statistics.mean(cpus) if cpus else float("nan")
        mean_cpu_ratio = mean_cpu / paper_mean_cpu if paper_mean_cpu > 0 else float("nan")
        rows.append({"mode": mode, "median_s": median, "p90_s": p90, "runs_per_step": runs, "ratio_to_paper": ratio,
                     "median_cpu_s": cpu, "cpu_ratio_to_paper": cpu_ratio, "mean_cpu_s": mean_cpu,
                     "mean_cpu_ratio_to_paper": mean_cpu_ratio})
        print(f"{mode:<22}{median:>10.3f}{p90:>9.3f}{runs:>11.1f}{ratio:>8.1f}x{cpu * 1000:>9.0f}{cpu_ratio:>8.1f}x"
              f"{mean_cpu * 1000:>10.0f}{mean_cpu_ratio:>8.1f}x")
    if breakdown:
        print("where a one-run step's time goes (medians over the problems):")
        for key in breakdown[0]:
            values = [row[key] for row in breakdown if row.get(key) == row.get(key)]
            if values:
                print(f"  {key:<44}{statistics.median(values):>9.1f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "problems": indices,
                "backend": args.backend,
                "max_mutants": envs["catch"].config.max_mutants,
                "wrong_programs": wrong_programs,
                "one_run_and_by_value_paid_the_same": same_reward,
                "differences": differences,
                "shipped_choice_paid_otherwise": shipped_differs,
                "one_run_breakdown": breakdown,
                "load_average_1min": loads,
                "rows": rows,
                "machine": platform.platform(),
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
