"""The sandbox cost of the Coder–Tester catch reward, side by side with the paper's reward.

Plays one reference turn (golden coder, golden tests as the tester) on HumanEval problems with
``tester_reward="paper"`` and with the default ``"catch"`` reward (wrong programs: mutants of the
golden solution), and reports the wall time of the tester's step and the sandbox runs it made:

* **catch, cold**: the first tester step of a problem anywhere (nothing cached, in memory or on
  disk), which also chooses the problem's mutants (up to ``max_mutant_candidates`` runs on the
  golden tests);
* **catch, from disk**: the first tester step of a problem in a new process, its mutants read
  from the disk cache that an earlier process wrote (``mutants.disk_cache_dir``);
* **catch, warm**: a later tester step of the same problem (mutants cached in memory);
* **paper**: the golden solution and the coder's code on the tester's tests only.

Modes alternate problem by problem on one warm sandbox, so load changes hit all of them alike.
Quote the ratios; the machine is shared. Results: a table, and JSON in
``benchmarks/results/tester_reward.json``.

    python benchmarks/tester_reward.py              # 24 problems
    python benchmarks/tester_reward.py --problems 6 # quicker
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


def tester_step(env: Any, index: int) -> tuple[float, int, dict[str, Any]]:
    """(seconds of the tester's step, sandbox runs it made, its record's info)."""
    sandbox = env.sandbox
    env.reset(seed=0, options={"problem_index": index})
    env.step(env.reference_action("coder"))
    runs_before = sandbox.runs
    started = time.perf_counter()
    env.step(env.reference_action("tester"))
    return time.perf_counter() - started, sandbox.runs - runs_before, dict(env.records[1].info)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=24, help="HumanEval problems (spread over the 164)")
    parser.add_argument("--backend", default="auto", help="sandbox backend (default auto)")
    args = parser.parse_args()

    import os
    import tempfile

    import sandboxes
    from llm_envs.envs.coder_tester import mutants

    # A disk cache of this run's own: "cold" means nothing cached anywhere.
    os.environ["LLM_ENVS_MUTANT_CACHE"] = tempfile.mkdtemp(prefix="tester-reward-mutants-")
    from llm_envs.envs.coder_tester.env import CoderTesterEnv

    sandbox = TimedSandbox(sandboxes.make_sandbox(args.backend))
    common = dict(split="test", task_kwargs={"split_policy": "benchmark"}, sandbox=sandbox, max_turns=1)
    envs = {
        "paper": CoderTesterEnv(tester_reward="paper", **common),
        "catch": CoderTesterEnv(**common),
    }
    step = max(1, 164 // args.problems)
    indices = list(range(0, 164, step))[: args.problems]
    mutants.clear_cache()
    tester_step(envs["paper"], indices[0])  # warm the sandbox's workers
    samples: dict[str, list[tuple[float, int]]] = {
        "paper": [],
        "catch, cold": [],
        "catch, from disk": [],
        "catch, warm": [],
    }
    wrong_programs = []
    try:
        for index in indices:
            samples["paper"].append(tester_step(envs["paper"], index)[:2])
            seconds, runs, info = tester_step(envs["catch"], index)
            samples["catch, cold"].append((seconds, runs))
            wrong_programs.append(info.get("wrong_programs", 0))
            mutants.clear_cache()  # a new process: the memory cache is empty, the disk one is not
            samples["catch, from disk"].append(tester_step(envs["catch"], index)[:2])
            samples["catch, warm"].append(tester_step(envs["catch"], index)[:2])
    finally:
        sandbox.inner.close()

    paper_median = statistics.median(s for s, _ in samples["paper"])
    rows = []
    print(f"{len(indices)} HumanEval problems, backend {args.backend}; wrong programs per problem: "
          f"median {statistics.median(wrong_programs):g}, min {min(wrong_programs)}")
    print(f"{'mode':<18}{'median s':>10}{'p90 s':>9}{'runs/step':>11}{'x paper':>9}")
    for mode, values in samples.items():
        times = sorted(s for s, _ in values)
        median = statistics.median(times)
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        runs = statistics.mean(r for _, r in values)
        ratio = median / paper_median if paper_median > 0 else float("nan")
        rows.append({"mode": mode, "median_s": median, "p90_s": p90, "runs_per_step": runs, "ratio_to_paper": ratio})
        print(f"{mode:<18}{median:>10.3f}{p90:>9.3f}{runs:>11.1f}{ratio:>8.1f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "problems": indices,
                "backend": args.backend,
                "max_mutants": envs["catch"].config.max_mutants,
                "wrong_programs": wrong_programs,
                "rows": rows,
                "machine": platform.platform(),
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
