"""Batch grading against one-at-a-time grading on a Coder–Tester rollout (issue 35, item 4).

A rollout of ``--samples`` Coder–Tester episodes (HumanEval, the default catch reward) is played
wave by wave through the trainer's environment side (``llm_trainers.rollout.LocalEnvGroup``,
what ``collect`` drives, without sampling): every instance's agent acts in each wave. Replies:
the coder writes the golden solution in even slots and a wrong constant in odd ones (the
environment's ``random_action``), the tester writes the golden tests, so episodes end after
one or two turns (``max_turns=2``). Modes, alternating round by round on one warm sandbox:

* **one at a time**: ``batch_grading=False``, one environment thread (``env_workers=1``, the
  trainer's default): each step grades its own programs while the others wait;
* **threads**: ``batch_grading=False`` with ``env_workers`` = the sandbox's pool size (the
  configuration that existed before, for reference);
* **batched**: ``batch_grading=True``, ``env_workers=1``: the programs of a wave's steps are
  submitted together to the sandbox's pool (``llm_envs.envs.grading.ahead``) and the steps are
  played as their own results arrive;
* **batched + threads**: both (``batch_grading=True`` with ``env_workers`` = the pool size).

Reported per mode: wall seconds per rollout, programs graded (calls of
``llm_envs.envs.grading.run_grading``, the same in every mode), programs per second per core
(``os.cpu_count()``), CPU seconds (this process plus every process of the sandbox's workers)
and programs per CPU second, and whether every record's reward equals the one-at-a-time
rollout's. The problems' mutants are chosen in a warm-up rollout first (as in a training run
after its first steps). Results: a table, and JSON in ``benchmarks/results/batch_grading.json``.

    nice -n 10 python benchmarks/batch_grading.py                 # 64 samples, 3 rounds
    nice -n 10 python benchmarks/batch_grading.py --samples 16 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "batch_grading.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sandbox_throughput import sandbox_cpu  # noqa: E402

MODES = ("one at a time", "threads", "batched", "batched + threads")


def play_rollout(envs: list[Any], seeds: list[int], *, batch: bool, env_workers: int) -> list[list[tuple[Any, ...]]]:
    """One rollout (every instance reset with its seed, then played wave by wave to its end);
    each instance's records as ``(agent, turn, reward, info)``."""
    import numpy as np

    from llm_trainers.rollout import LocalEnvGroup, Move

    group = LocalEnvGroup(envs, env_workers=env_workers, batch_grading=batch)
    views = group.reset(seeds, {})
    active = [i for i, v in enumerate(views) if not v.over]
    while active:
        moves = []
        for i in active:
            env = envs[i]
            agent = env.agent_selection
            if agent == "coder" and i % 2:
                text = env.random_action(agent, np.random.default_rng(seeds[i] * 7 + env.turn))
            else:
                text = env.reference_action(agent)
            moves.append(Move(i, agent, [text], False))
        for move, played in zip(moves, group.play(moves)):
            if played.failure is not None:
                raise RuntimeError(f"slot {move.slot}: {played.failure}")
            views[move.slot] = played.view
        active = [i for i in active if not views[i].over]
    return [
        [(r.agent, r.turn, r.reward, json.dumps(r.info, sort_keys=True, default=str)) for r in env.records]
        for env in envs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=64, help="episodes in the rollout (default 64)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each plays every mode once")
    parser.add_argument("--backend", default="bwrap", help="sandbox backend (default bwrap)")
    parser.add_argument("--pool-size", type=int, default=None, help="sandbox workers (default: its own)")
    parser.add_argument("--tester-reward", default="catch", choices=("catch", "paper"),
                        help="catch: each tester step grades the golden, the code and the mutants (default); "
                        "paper: the golden and the code only")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    os.environ.setdefault("LLM_ENVS_MUTANT_CACHE", tempfile.mkdtemp(prefix="batch-grading-mutants-"))
    import llm_envs
    import sandboxes
    from llm_envs.envs import grading
    from llm_trainers.rollout import spawn_envs

    # Workers are not recycled during the benchmark, so every rollout's CPU can be read.
    sandbox = sandboxes.make_sandbox(
        args.backend, pool_size=args.pool_size, max_jobs_per_worker=1_000_000
    ).warm(heavy=False)
    cores = os.cpu_count() or 1
    width = sandbox.max_concurrency
    counted = {"n": 0}
    inner = grading.run_grading

    def counting(sb: Any, g: Any) -> Any:
        counted["n"] += 1
        return inner(sb, g)

    grading.run_grading = counting
    first = llm_envs.make(
        "llm/CoderTester-v0", sandbox=sandbox, split="test", task_kwargs={"split_policy": "benchmark"}, max_turns=2,
        tester_reward=args.tester_reward,
    )
    envs = spawn_envs(first, args.samples)
    seeds = list(range(args.samples))
    started = time.perf_counter()
    reference = play_rollout(envs, seeds, batch=True, env_workers=1)  # warm-up: chooses the mutants
    warm_up_s = time.perf_counter() - started
    workers = {"one at a time": 1, "threads": width, "batched": 1, "batched + threads": width}
    samples: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    cpu_probe = sandbox_cpu(sandbox)
    loads = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        order = MODES if round_ % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            counted["n"] = 0
            cpu_before, host_before = cpu_probe(), time.process_time()
            started = time.perf_counter()
            got = play_rollout(envs, seeds, batch=mode.startswith("batched"), env_workers=workers[mode])
            wall = time.perf_counter() - started
            cpu_after, host = cpu_probe(), time.process_time() - host_before
            sandbox_s = cpu_after[1] - cpu_before[1] if cpu_after[0] == cpu_before[0] else None
            samples[mode].append({
                "wall_s": wall,
                "programs": counted["n"],
                "cpu_s": None if sandbox_s is None else sandbox_s + host,
                "host_cpu_s": host,
                "same_rewards": [[r[:3] for r in e] for e in got] == [[r[:3] for r in e] for e in reference],
                "same_records": got == reference,
                # What differs from the warm-up rollout (a program near its time limit, say).
                "differences": [
                    {"slot": slot, "record": k, "reference": list(want[k]) if k < len(want) else None,
                     "got": list(have[k]) if k < len(have) else None}
                    for slot, (want, have) in enumerate(zip(reference, got))
                    for k in range(max(len(want), len(have)))
                    if k >= len(want) or k >= len(have) or want[k][:3] != have[k][:3]
                ][:5],
            })
            print(f"round {round_} {mode:>14}: {wall:.2f} s, {counted['n']} programs", flush=True)
        loads.append(os.getloadavg()[0])
    grading.run_grading = inner
    sandbox.close()

    base = statistics.median(s["wall_s"] for s in samples["one at a time"])
    rows = []
    for mode in MODES:
        runs = samples[mode]
        wall = statistics.median(s["wall_s"] for s in runs)
        programs = statistics.median(s["programs"] for s in runs)
        cpus = [s["cpu_s"] for s in runs if s["cpu_s"] is not None]
        cpu = statistics.median(cpus) if cpus else None
        rows.append({
            "mode": mode,
            "env_workers": workers[mode],
            "wall_s": wall,
            "programs": programs,
            "programs_per_s_per_core": programs / wall / cores,
            "cpu_s": cpu,
            "programs_per_cpu_s": programs / cpu if cpu else None,
            "speedup": base / wall,
            "same_rewards": all(s["same_rewards"] for s in runs),
            "same_records": all(s["same_records"] for s in runs),
            "rounds": runs,
        })
    print()
    print(f"Coder-Tester rollout of {args.samples} samples ({args.tester_reward} tester reward), "
          f"{args.backend} pool of {width}, {cores} cores, "
          f"load average {min(loads):.1f}-{max(loads):.1f}")
    print("| mode | env threads | s / rollout | programs | programs/s/core | CPU s | programs / CPU s | × one at a time | same rewards |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = f"{r['cpu_s']:.2f}" if r["cpu_s"] is not None else "—"
        per_cpu = f"{r['programs_per_cpu_s']:.1f}" if r["programs_per_cpu_s"] else "—"
        print(f"| {r['mode']} | {r['env_workers']} | {r['wall_s']:.2f} | {r['programs']:.0f} | "
              f"{r['programs_per_s_per_core']:.1f} | {cpu} | {per_cpu} | {r['speedup']:.2f} | "
              f"{'yes' if r['same_rewards'] else 'NO'} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "samples": args.samples, "rounds": args.rounds, "tester_reward": args.tester_reward, "backend": args.backend, "pool_size": width,
        "cores": cores, "load_average": loads, "warm_up_s": warm_up_s, "python": platform.python_version(),
        "machine": platform.platform(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rows": rows,
    }, indent=2))
    print(f"\nJSON: {args.output}")
    if not all(r["same_rewards"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
