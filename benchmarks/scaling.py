"""Scale-out: rollout and evaluation throughput against the number of Ray environment workers.

Two environments, each measured side by side in one run:

* **CoderTester (HumanEval)** — sandbox-heavy: every coder action runs the code on the golden
  tests, every tester action runs the golden solution on the tests, every turn runs the code on
  the tester's tests. Played by its reference agents, so the work is the sandbox's, not a model's.
* **Signalling** — light: a step is a few string operations, so what is measured is the cost of
  moving the work into Ray actors (serialisation, a round trip per wave).

For each: the single-process layout (``workers = 0``) and 1, 2, ... Ray workers
(``--workers``), for

* **rollout**: :func:`llm_trainers.rollout.collect` with AT-GRPO tree sampling (``k`` candidates
  per decision, each played on a clone and scored where the environment lives), the engine a
  deterministic scripted one that answers with the reference reply (no model time: the
  environment side alone), instances in :class:`~llm_trainers.distributed.env_workers.RayEnvGroup`;
* **evaluation**: :func:`llm_envs.evaluation.evaluate` in one process against the same with
  ``runner=RayEvaluation(...)``, reference agents; episodes per
  second once the workers are up, and the workers' start-up (actors, imports, environments)
  apart.

With ``--train``, also a whole training step of the CPU testbed (``signalling_at_grpo_l2``, tiny
model) in one process against ``signalling_at_grpo_l2_ray`` (2 environment workers, 1 HF engine
actor, 2 gloo learner ranks): the time per step and its phases (torch on one thread in every
process, so the layouts compare on equal footing).

Every Ray row also checks that its records (rollout) or episodes (evaluation) equal the
single-process ones. Outputs: a table and ``benchmarks/results/scaling.{json,md}``. Quote ratios
to the single-process row of the same run. On a machine with C cores the curve flattens at
C workers; ``docs/scaling.md`` extrapolates.

    python benchmarks/scaling.py               # workers 1, 2, 4
    python benchmarks/scaling.py --quick       # fewer environments, workers 1, 2
    python benchmarks/scaling.py --train       # also a training step, single process vs Ray
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llm_envs  # noqa: E402
from llm_envs.agents.spec import resolve_agents  # noqa: E402
from llm_envs.envs.coder_tester import rules as coder_rules  # noqa: E402
from llm_trainers.rollout import collect, spawn_envs  # noqa: E402
from llm_trainers.scripted import ScriptedEngine  # noqa: E402

RESULTS_DIR = ROOT / "benchmarks" / "results"
SYMBOLS = ("red", "green", "blue", "yellow")
ENVS = {
    "CoderTester": ("llm/CoderTester-v0", {"task": "humaneval", "split": "train"}),
    "Signalling": ("llm/Signalling-v0", {"rounds": 3}),
}


# ---------------------------------------------------------------------------- scripted replies
def coder_tester_reply() -> Any:
    """The reference reply of CoderTester's agents, found from the problem in the prompt."""
    env_id, kwargs = ENVS["CoderTester"]
    source = llm_envs.make(env_id, **kwargs).task_source
    problems = {p.entry_point: p for p in source}

    def reply(policy: str, observation: dict[str, Any], candidate: int) -> str:
        name = re.search(r"complete the function `([^`]+)`", observation["prompt"])
        problem = problems[name.group(1)] if name else next(iter(problems.values()))
        if policy == "coder":
            return coder_rules.reference_coder_reply(problem)
        return coder_rules.reference_tester_reply(problem, 8)

    return reply


def signalling_reply(policy: str, observation: dict[str, Any], candidate: int) -> str:
    word = re.search(r"(?:Target|Message): (\w+)", observation["prompt"])
    base = SYMBOLS.index(word.group(1)) if word and word.group(1) in SYMBOLS else 0
    return SYMBOLS[(base + candidate) % len(SYMBOLS)]


# ---------------------------------------------------------------------------- measurements
def time_rollout(name: str, workers: int, num_envs: int, k: int, repeats: int, cpus: float) -> dict[str, Any]:
    """Rollouts per second of ``num_envs`` instances; the records for the equality check."""
    env_id, kwargs = ENVS[name]
    reply = coder_tester_reply() if name == "CoderTester" else signalling_reply
    seeds = list(range(1000, 1000 + num_envs))
    if workers == 0:
        group: Any = spawn_envs(llm_envs.make(env_id, **kwargs), num_envs)
    else:
        from llm_trainers.distributed.env_workers import RayEnvGroup

        group = RayEnvGroup(env_id, kwargs, num_envs, workers, cpus_per_worker=cpus)
    try:
        collect(group, seeds, ScriptedEngine(reply), lambda a: a, k=k, tree=True)  # warm-up (sandboxes)
        times, records, actions = [], None, 0
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = collect(group, seeds, ScriptedEngine(reply), lambda a: a, k=k, tree=True)
            times.append(time.perf_counter() - t0)
            group = res.envs if workers == 0 else group
            records = [dataclasses.asdict(r) for r in res.records]
            actions = len(res.records)
    finally:
        if workers:
            group.close()
    best = min(times)
    return {"seconds": best, "actions_per_s": actions / best, "episodes_per_s": num_envs / best, "records": records}


def time_eval(name: str, workers: int, episodes: int, concurrency: int, cpus: float) -> dict[str, Any]:
    env_id, kwargs = ENVS[name]
    """Episodes per second once the workers are up (``wall_s`` of the summary), and the start-up."""
    out = Path(tempfile.mkdtemp(prefix="scaling-eval-"))
    t0 = time.perf_counter()
    if workers == 0:
        from llm_envs.evaluation import evaluate

        agents = resolve_agents({None: "reference"}, list(llm_envs.make(env_id, **kwargs).possible_agents))
        summary = evaluate(env_id, agents, episodes=episodes, concurrency=concurrency, env_kwargs=kwargs,
                           out_dir=out, progress=False, plot=False)
    else:
        from llm_envs.distributed.evaluation import RayEvaluation
        from llm_envs.evaluation import evaluate

        summary = evaluate(env_id, {None: "reference"}, episodes=episodes, concurrency=concurrency,
                           env_kwargs=kwargs, out_dir=out, progress=False, plot=False,
                           runner=RayEvaluation(workers=workers, cpus_per_worker=cpus,
                                                chunk_size=max(1, episodes // (2 * workers))))
    total = time.perf_counter() - t0
    from llm_envs.runner import load_episodes

    outcomes = {e.index: e.outcome() for e in load_episodes(out / "episodes.jsonl")}
    seconds = summary["wall_s"]
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": seconds, "startup_s": total - seconds, "episodes_per_s": episodes / seconds,
            "outcomes": outcomes}


def ray_round_trip_ms(calls: int = 300) -> float:
    """Mean milliseconds of one actor call carrying a wave's worth of observations (32 × 400 bytes)."""
    import ray

    @ray.remote(num_cpus=0.01)
    class Echo:
        def echo(self, value: Any) -> Any:
            return value

    actor = Echo.remote()
    payload = [{"instruction": "x" * 200, "prompt": "y" * 200}] * 32
    ray.get(actor.echo.remote(payload))
    t0 = time.perf_counter()
    for _ in range(calls):
        ray.get(actor.echo.remote(payload))
    ms = (time.perf_counter() - t0) / calls * 1000
    ray.kill(actor)
    return ms


PHASES = ("generate_s", "env_s", "logprob_s", "update_s", "push_s", "step_s")


def time_train_step(config: str, steps: int) -> dict[str, Any]:
    """Mean seconds per training step (after one warm-up step) and per phase."""
    import torch

    from llm_trainers import make_trainer
    from llm_trainers.config import load_config

    torch.set_num_threads(1)
    out = Path(tempfile.mkdtemp(prefix="scaling-train-"))
    cfg = load_config(config, [f"run.steps={steps + 1}", "run.eval_every=-1", "run.save_every=-1",
                               "run.export_final=false", "run.progress=false", "run.tensorboard=false",
                               f"run.output_dir={out}"])
    t0 = time.perf_counter()
    trainer = make_trainer(cfg)
    startup = time.perf_counter() - t0
    try:
        trainer.train()
    finally:
        trainer.close()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][1:]
    shutil.rmtree(out, ignore_errors=True)
    return {"startup_s": startup, **{p: sum(r[f"time/{p}"] for r in rows) / len(rows) for p in PHASES}}


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, nargs="+", help="Ray worker counts (default 1 2 4; quick 1 2)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs of the local Ray instance")
    parser.add_argument("--train", action="store_true", help="also time a training step, single process vs Ray")
    args = parser.parse_args(argv)
    workers = args.workers or ([1, 2] if args.quick else [1, 2, 4])
    sizes = {"CoderTester": (8, 16) if args.quick else (16, 32), "Signalling": (32, 64) if args.quick else (64, 128)}
    repeats = 1 if args.quick else 2

    import ray

    ray_dir = tempfile.mkdtemp(prefix="rt")
    ray.init(num_cpus=args.cpus, include_dashboard=False, object_store_memory=256 * 1024 * 1024,
             _temp_dir=ray_dir, log_to_driver=False)
    cpus = max(0.01, args.cpus / max(workers))  # every layout fits in the instance
    rows: list[dict[str, Any]] = []
    try:
        round_trip = ray_round_trip_ms()
        print(f"Ray actor round trip with a wave's observations: {round_trip:.2f} ms", flush=True)
        for name in ENVS:
            num_envs, episodes = sizes[name]
            base_roll = base_eval = None
            for w in [0, *workers]:
                roll = time_rollout(name, w, num_envs, 2, repeats, cpus)
                ev = time_eval(name, w, episodes, 4, cpus)
                if w == 0:
                    base_roll, base_eval = roll, ev
                row = {
                    "env": name, "workers": w, "instances": num_envs, "eval_episodes": episodes,
                    "rollout_s": roll["seconds"], "rollout_actions_per_s": roll["actions_per_s"],
                    "rollout_speedup": base_roll["seconds"] / roll["seconds"],
                    "eval_s": ev["seconds"], "eval_startup_s": ev["startup_s"],
                    "eval_episodes_per_s": ev["episodes_per_s"],
                    "eval_speedup": base_eval["seconds"] / ev["seconds"],
                    "rollout_equal": roll["records"] == base_roll["records"],
                    "eval_equal": ev["outcomes"] == base_eval["outcomes"],
                }
                rows.append(row)
                print(_line(row), flush=True)
        train = []
        if args.train:
            steps = 2 if args.quick else 4
            for config in ("signalling_at_grpo_l2", "signalling_at_grpo_l2_ray"):
                train.append({"config": config, **time_train_step(config, steps)})
                print(f"{config}: {train[-1]['step_s']:.2f} s/step", flush=True)
    finally:
        ray.shutdown()
        shutil.rmtree(ray_dir, ignore_errors=True)
    table = (_table(rows) + f"\n\nRay actor round trip (a wave's observations): {round_trip:.2f} ms"
             + ("\n\n" + _train_table(train) if train else ""))
    print("\n" + table)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "ray_cpus": args.cpus, "quick": args.quick,
            "python": platform.python_version(), "ray_round_trip_ms": round_trip,
            "load_average": os.getloadavg()}
    (RESULTS_DIR / "scaling.json").write_text(json.dumps({"meta": meta, "rows": rows, "train": train}, indent=2) + "\n")
    (RESULTS_DIR / "scaling.md").write_text(table + "\n")
    bad = [r for r in rows if not (r["rollout_equal"] and r["eval_equal"])]
    if bad:
        print(f"MISMATCH: {len(bad)} row(s) differ from the single-process run", file=sys.stderr)
        return 1
    return 0


def _line(row: dict[str, Any]) -> str:
    return (f"{row['env']:12s} workers {row['workers']}: rollout {row['rollout_s']:.2f}s "
            f"({row['rollout_speedup']:.2f}x), eval {row['eval_s']:.2f}s ({row['eval_speedup']:.2f}x), equal "
            f"{row['rollout_equal'] and row['eval_equal']}")


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("| env | Ray env workers | rollout: actions/s | vs 1 process | eval: episodes/s | vs 1 process | "
            "eval start-up s | = 1 process |\n|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        label = "0 (one process)" if r["workers"] == 0 else str(r["workers"])
        lines.append(f"| {r['env']} | {label} | {r['rollout_actions_per_s']:.1f} | {r['rollout_speedup']:.2f}x | "
                     f"{r['eval_episodes_per_s']:.2f} | {r['eval_speedup']:.2f}x | {r['eval_startup_s']:.1f} | "
                     f"{'yes' if r['rollout_equal'] and r['eval_equal'] else 'NO'} |")
    return "\n".join(lines)


def _train_table(rows: list[dict[str, Any]]) -> str:
    head = ("| config | s/step | generate | env | log-probs | update | push | vs 1 process | start-up s |\n"
            "|---|---|---|---|---|---|---|---|---|")
    base = rows[0]["step_s"]
    lines = [head]
    for r in rows:
        lines.append(f"| {r['config']} | {r['step_s']:.2f} | {r['generate_s']:.2f} | {r['env_s']:.2f} | "
                     f"{r['logprob_s']:.2f} | {r['update_s']:.2f} | {r['push_s']:.2f} | {base / r['step_s']:.2f}x | "
                     f"{r['startup_s']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
