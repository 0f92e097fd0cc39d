"""The sandbox cost of the Coder–Tester catch reward on stdin/stdout problems, side by side with
the paper's reward (the stdin/stdout counterpart of ``tester_reward.py``).

APPS and CodeContests, the paper's code tasks, are stdin/stdout problems; neither can be
downloaded here, so the problems are 16 small ones of that kind written for this benchmark
(a golden solution reading stdin, four cases each). One reference turn per problem (golden
coder, golden cases as the tester's), with ``tester_reward="paper"`` (the golden solution and
the coder's code on the tester's cases) and with the catch reward (the problem's mutants too):

* **per program, ...** (``catch_runs="per_program"``, and every catch step before
  ``llm_envs.envs.coder_tester.io_runs``): one sandbox run per case of every program;
* **one run, ...** (the default): the golden solution and every wrong program in one run, each
  case of each in a process forked inside it (``sandboxes.run_io_programs``), a wrong program
  stopped at its first wrong answer on a case the golden passed; the mutants chosen that way
  too;
* **cold**: the problem's first step anywhere (its mutants chosen on the step); **from disk**:
  the first step in a new process (mutants read from the disk cache: also a prepared problem's
  first step, ``llm-envs prepare``); **warm**: a later step;
* with ``--baseline-driver COMMIT``, **A/B: this tree** and **A/B: COMMIT**: a later step
  graded by this tree's ``run_io_programs`` and by COMMIT's harness and driver
  (``harness_cost.load_driver_harness``), each after an untimed step of its own, in an order
  that alternates; the summary line gives this tree's CPU over COMMIT's.

Modes alternate problem by problem on one warm sandbox. The CPU of a step is summed over every
process of the sandbox's workers and this one (``harness_cost._tree_cpu``). Results: a table,
and JSON in ``benchmarks/results/tester_reward_io.json``.

    python benchmarks/tester_reward_io.py --backend bwrap
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

RESULTS = Path(__file__).resolve().parent / "results" / "tester_reward_io.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_throughput import TimedSandbox  # noqa: E402
from tester_reward import tester_step  # noqa: E402  (the same step, timed the same way)

# (golden solution, four (stdin, expected stdout) cases)
PROBLEMS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "sum": ("a, b = map(int, input().split())\nprint(a + b)\n",
            [("1 2\n", "3\n"), ("5 5\n", "10\n"), ("-3 7\n", "4\n"), ("100 1\n", "101\n")]),
    "max": ("n = int(input())\nxs = list(map(int, input().split()))\nbest = xs[0]\nfor x in xs[1:]:\n"
            "    if x > best:\n        best = x\nprint(best)\n",
            [("3\n1 5 2\n", "5\n"), ("1\n-4\n", "-4\n"), ("4\n2 2 9 1\n", "9\n"), ("2\n-1 -2\n", "-1\n")]),
    "vowels": ("s = input().strip()\ncount = 0\nfor c in s:\n    if c in 'aeiou':\n        count += 1\nprint(count)\n",
               [("hello\n", "2\n"), ("xyz\n", "0\n"), ("aeiou\n", "5\n"), ("banana\n", "3\n")]),
    "factorial": ("n = int(input())\nr = 1\nfor i in range(2, n + 1):\n    r = r * i % 1000000007\nprint(r)\n",
                  [("0\n", "1\n"), ("5\n", "120\n"), ("10\n", "3628800\n"), ("3\n", "6\n")]),
    "reverse": ("words = input().split()\nprint(' '.join(reversed(words)))\n",
                [("a b c\n", "c b a\n"), ("one\n", "one\n"), ("x y\n", "y x\n"), ("1 2 3 4\n", "4 3 2 1\n")]),
    "fibonacci": ("n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)\n",
                  [("0\n", "0\n"), ("1\n", "1\n"), ("10\n", "55\n"), ("20\n", "6765\n")]),
    "prime": ("n = int(input())\nok = n > 1\ni = 2\nwhile i * i <= n:\n    if n % i == 0:\n        ok = False\n"
              "        break\n    i += 1\nprint('YES' if ok else 'NO')\n",
              [("2\n", "YES\n"), ("9\n", "NO\n"), ("97\n", "YES\n"), ("1\n", "NO\n")]),
    "sort": ("import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nxs = sorted(map(int, data[1:1 + n]))\n"
             "print(*xs)\n",
             [("3\n3 1 2\n", "1 2 3\n"), ("1\n5\n", "5\n"), ("4\n4 -1 0 2\n", "-1 0 2 4\n"), ("2\n2 2\n", "2 2\n")]),
    "gcd": ("a, b = map(int, input().split())\nwhile b:\n    a, b = b, a % b\nprint(a)\n",
            [("12 18\n", "6\n"), ("7 5\n", "1\n"), ("0 9\n", "9\n"), ("100 75\n", "25\n")]),
    "digits": ("n = input().strip()\nprint(sum(int(c) for c in n))\n",
               [("123\n", "6\n"), ("0\n", "0\n"), ("999\n", "27\n"), ("1010\n", "2\n")]),
    "palindrome": ("s = input().strip()\nif s == s[::-1]:\n    print('YES')\nelse:\n    print('NO')\n",
                   [("abba\n", "YES\n"), ("abc\n", "NO\n"), ("a\n", "YES\n"), ("ab\n", "NO\n")]),
    "pairs": ("n, k = map(int, input().split())\nxs = list(map(int, input().split()))\nc = 0\nfor i in range(n):\n"
              "    for j in range(i + 1, n):\n        if xs[i] + xs[j] == k:\n            c += 1\nprint(c)\n",
              [("4 5\n1 4 2 3\n", "2\n"), ("3 2\n1 1 1\n", "3\n"), ("2 10\n1 2\n", "0\n"), ("5 0\n0 0 1 -1 2\n", "2\n")]),
    "queries": ("import sys\ninput = sys.stdin.readline\nn, q = map(int, input().split())\n"
                "xs = list(map(int, input().split()))\nprefix = [0]\nfor x in xs:\n    prefix.append(prefix[-1] + x)\n"
                "out = []\nfor _ in range(q):\n    l, r = map(int, input().split())\n"
                "    out.append(prefix[r] - prefix[l - 1])\nprint('\\n'.join(map(str, out)))\n",
                [("3 2\n1 2 3\n1 2\n2 3\n", "3\n5\n"), ("1 1\n7\n1 1\n", "7\n"), ("4 1\n1 1 1 1\n1 4\n", "4\n"),
                 ("2 2\n-1 1\n1 1\n1 2\n", "-1\n0\n")]),
    "grid": ("h, w = map(int, input().split())\nrows = [input() for _ in range(h)]\n"
             "print(sum(row.count('#') for row in rows))\n",
             [("2 2\n#.\n.#\n", "2\n"), ("1 3\n...\n", "0\n"), ("2 3\n###\n#.#\n", "5\n"), ("1 1\n#\n", "1\n")]),
    "binary": ("n = int(input())\nbits = ''\nwhile n > 0:\n    bits = str(n % 2) + bits\n    n //= 2\nprint(bits or '0')\n",
               [("5\n", "101\n"), ("0\n", "0\n"), ("8\n", "1000\n"), ("1\n", "1\n")]),
    "stack": ("s = input().strip()\ndepth = 0\nok = True\nfor c in s:\n    depth += 1 if c == '(' else -1\n"
              "    if depth < 0:\n        ok = False\nprint('YES' if ok and depth == 0 else 'NO')\n",
              [("()\n", "YES\n"), ("(()\n", "NO\n"), ("())(\n", "NO\n"), ("(())()\n", "YES\n")]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="auto", help="sandbox backend (default auto)")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the problems")
    parser.add_argument("--baseline-driver", metavar="COMMIT",
                        help="also a later step with the run_io_programs of COMMIT's harness and driver (from git), "
                             "sampled beside this tree's")
    args = parser.parse_args()

    import sandboxes
    from llm_envs.envs.coder_tester import mutants
    from llm_envs.tasks import Problem, TaskSource

    disk_cache = os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-io-")
    from llm_envs.envs.coder_tester.env import CoderTesterEnv

    class Source(TaskSource):
        name = "benchmark-io"
        has_golden_solutions = True

        def __init__(self) -> None:
            self.problems = [Problem(id=f"io/{name}", prompt=f"Solve {name}.", split="test", solution=solution,
                                     tests=tuple(cases), style="io") for name, (solution, cases) in PROBLEMS.items()]
            self.split = "test"

        def __len__(self) -> int:
            return len(self.problems)

        def get(self, index: int) -> Problem:
            return self.problems[index]

    sandbox = TimedSandbox(sandboxes.make_sandbox(args.backend))
    source = Source()
    envs = {
        "paper": CoderTesterEnv(task_source=source, sandbox=sandbox, max_turns=1, tester_reward="paper"),
        "per program": CoderTesterEnv(task_source=source, sandbox=sandbox, max_turns=1, catch_runs="per_program"),
        "one run": CoderTesterEnv(task_source=source, sandbox=sandbox, max_turns=1),
    }
    modes = ["paper", "per program, cold", "per program, from disk", "per program, warm",
             "one run, cold", "one run, from disk", "one run, warm"]
    baseline_mode = f"A/B: {args.baseline_driver}" if args.baseline_driver else None
    ab_mode = "A/B: this tree"
    if baseline_mode:
        from harness_cost import load_driver_harness

        this_tree_runs, baseline_runs = sandboxes.run_io_programs, load_driver_harness(args.baseline_driver).run_io_programs
        modes += [ab_mode, baseline_mode]
    samples: dict[str, list[tuple[float, int, float | None]]] = {mode: [] for mode in modes}
    keys = ("golden_solution_pass_rate", "wrong_programs", "wrong_programs_caught")
    differences: list[dict[str, Any]] = []
    loads = [os.getloadavg()[0]]
    tester_step(envs["paper"], 0)  # warm the sandbox's workers

    def sample(mode: str, env: Any, index: int) -> dict[str, Any]:
        seconds, runs, info, cpu = tester_step(env, index)
        samples[mode].append((seconds, runs, cpu))
        return info

    def cold(mode: str, env: Any, index: int) -> dict[str, Any]:
        mutants.clear_cache()
        os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-io-")
        try:
            return sample(mode, env, index)
        finally:
            os.environ["LLM_ENVS_MUTANT_CACHE"] = disk_cache

    try:
        for _round in range(args.rounds):
            for index in range(len(source)):
                sample("paper", envs["paper"], index)
                cold("per program, cold", envs["per program"], index)
                got = {"one run, cold": cold("one run, cold", envs["one run"], index)}
                mutants.clear_cache()
                envs["one run"].reset(seed=0, options={"problem_index": index})
                envs["one run"]._mutants()  # (chosen into the disk cache, as a prepared problem's are)
                mutants.clear_cache()  # a new process: the memory cache is empty, the disk one is not
                sample("per program, from disk", envs["per program"], index)
                mutants.clear_cache()
                got["one run, from disk"] = sample("one run, from disk", envs["one run"], index)
                got["one run, warm"] = sample("one run, warm", envs["one run"], index)
                if baseline_mode:  # (grading.py imports run_io_programs from sandboxes at each call)
                    # Each driver: a step untimed (its host caches warm), then the timed one; which
                    # goes first alternates.
                    sides = [(ab_mode, this_tree_runs), (baseline_mode, baseline_runs)]
                    for mode, runs in sides if (index + _round) % 2 == 0 else sides[::-1]:
                        sandboxes.run_io_programs = runs
                        try:
                            tester_step(envs["one run"], index)
                            got[mode] = sample(mode, envs["one run"], index)
                        finally:
                            sandboxes.run_io_programs = this_tree_runs
                want = sample("per program, warm", envs["per program"], index)
                for mode, info in got.items():
                    if tuple(info.get(k) for k in keys) != tuple(want.get(k) for k in keys):
                        differences.append({"problem": index, "mode": mode, "got": [info.get(k) for k in keys],
                                            "per program": [want.get(k) for k in keys]})
                loads.append(os.getloadavg()[0])
    finally:
        sandbox.inner.close()

    paper_cpus = [c for _, _, c in samples["paper"] if c is not None]
    paper_cpu, paper_mean = statistics.median(paper_cpus), statistics.mean(paper_cpus)
    paper_wall = statistics.median(s for s, _, _ in samples["paper"])
    print(f"{len(source)} stdin/stdout problems x {args.rounds}, backend {args.backend}; load average (1 min) "
          f"{min(loads):.1f}-{max(loads):.1f}; one run paid what per-program runs paid: {not differences}")
    for difference in differences:
        print(f"  differs: {difference}")
    print(f"{'mode':<24}{'median s':>10}{'x paper':>9}{'runs/step':>11}{'CPU ms':>9}{'x paper':>9}{'mean CPU':>10}"
          f"{'x paper':>9}")
    rows = []
    for mode, values in samples.items():
        wall = statistics.median(s for s, _, _ in values)
        runs = statistics.mean(r for _, r, _ in values)
        cpus = [c for _, _, c in values if c is not None]
        cpu, mean = statistics.median(cpus), statistics.mean(cpus)
        rows.append({"mode": mode, "median_s": wall, "ratio_to_paper": wall / paper_wall, "runs_per_step": runs,
                     "median_cpu_s": cpu, "cpu_ratio_to_paper": cpu / paper_cpu, "mean_cpu_s": mean,
                     "mean_cpu_ratio_to_paper": mean / paper_mean})
        print(f"{mode:<24}{wall:>10.3f}{wall / paper_wall:>8.1f}x{runs:>11.1f}{cpu * 1000:>9.0f}"
              f"{cpu / paper_cpu:>8.1f}x{mean * 1000:>10.0f}{mean / paper_mean:>8.1f}x")
    comparison = None
    if baseline_mode:
        pairs = [(ours, theirs) for (_, _, ours), (_, _, theirs) in zip(samples[ab_mode], samples[baseline_mode])
                 if ours and theirs]
        comparison = {"baseline_driver": args.baseline_driver,
                      "median_of_ratios": statistics.median(o / t for o, t in pairs),
                      "ratio_of_sums": sum(o for o, _ in pairs) / sum(t for _, t in pairs)}
        print(f"a later step's CPU, this tree / {args.baseline_driver}: median of the per-step ratios "
              f"{comparison['median_of_ratios']:.2f}, ratio of the sums {comparison['ratio_of_sums']:.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    per_problem = {mode: [[round(s, 4), r, None if c is None else round(c, 4)] for s, r, c in values]
                   for mode, values in samples.items()}
    RESULTS.write_text(json.dumps({"problems": list(PROBLEMS), "backend": args.backend, "rounds": args.rounds,
                                   "samples_seconds_runs_cpu": per_problem,
                                   "one_run_paid_the_same": not differences, "differences": differences,
                                   "load_average_1min": loads, "rows": rows, "baseline": comparison, "machine": platform.platform()},
                                  indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
