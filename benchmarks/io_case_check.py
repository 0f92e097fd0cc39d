"""The syntax check that lets a stdin/stdout program run its cases in one process, this tree's
side by side with another commit's.

``run_io_programs`` runs the cases of a program one after another in one process only where
``sandboxes._case_state.keeps_to_itself`` finds that the program changes nothing it did not make
itself; any other program runs each case in a process of its own (slower, never wrong). On the
programs the Coder–Tester grades on this benchmark's stdin/stdout problems
(``tester_reward_io.PROBLEMS``: each golden solution and its mutant candidates), this prints how
many each check lets share a process, the programs on which the two checks disagree, and the
host CPU of one check (uncached), this tree's over the baseline's, alternating round by round.

    python benchmarks/io_case_check.py --baseline 3957dc3

Results: a table, and JSON in ``benchmarks/results/io_case_check.json``.
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

RESULTS = Path(__file__).resolve().parent / "results" / "io_case_check.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_cost import load_driver_harness  # noqa: E402
from tester_reward_io import PROBLEMS  # noqa: E402

from llm_envs.envs.coder_tester import mutants  # noqa: E402
from sandboxes._case_state import keeps_to_itself  # noqa: E402


def corpus(candidates: int) -> list[str]:
    """Each problem's golden solution and up to `candidates` mutant candidates of it."""
    programs = []
    for name, (solution, _cases) in PROBLEMS.items():
        programs += [solution, *mutants.MutantSource(solution, functions_only=False, key=f"io/{name}", limit=candidates)]
    return programs


def baseline_check(commit: str):
    module = load_driver_harness(commit)
    check = getattr(module, "keeps_to_itself", None) or module._keeps_to_itself
    return getattr(check, "__wrapped__", check)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit whose check to compare with")
    parser.add_argument("--candidates", type=int, default=32, help="mutant candidates per problem")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    programs = corpus(args.candidates)
    checks = {"this tree": keeps_to_itself.__wrapped__, args.baseline: baseline_check(args.baseline)}
    verdicts = {label: [check(p) for p in programs] for label, check in checks.items()}
    cpu: dict[str, list[float]] = {label: [] for label in checks}
    for round_ in range(args.rounds):
        order = list(checks) if round_ % 2 == 0 else list(checks)[::-1]
        for label in order:
            start = time.process_time()
            for program in programs:
                checks[label](program)
            cpu[label].append((time.process_time() - start) / len(programs) * 1e6)
    differ = [i for i, (a, b) in enumerate(zip(*verdicts.values())) if a != b]
    ratios = [a / b for a, b in zip(cpu["this tree"], cpu[args.baseline])]

    print(f"{len(programs)} programs ({len(PROBLEMS)} problems); load average (1 min) {os.getloadavg()[0]:.1f}")
    print(f"{'check':<16}{'in one process':>16}{'µs CPU / check':>16}")
    for label in checks:
        print(f"{label:<16}{sum(verdicts[label]):>16}{statistics.median(cpu[label]):>16.0f}")
    print(f"this tree / {args.baseline}: CPU median ratio {statistics.median(ratios):.2f}; "
          f"programs on which the checks disagree: {len(differ)}")
    for i in differ:
        print(f"  {programs[i][:70]!r}: this tree {verdicts['this tree'][i]}, {args.baseline} {verdicts[args.baseline][i]}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({
        "baseline": args.baseline, "programs": len(programs), "in_one_process": {k: sum(v) for k, v in verdicts.items()},
        "cpu_us_per_check": cpu, "median_ratio": statistics.median(ratios), "disagree": len(differ),
        "machine": platform.platform(), "load_average": os.getloadavg()[0],
    }, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
