"""Asynchronous training: wall time per step and samples per second, synchronous against
``rollout.async.max_staleness`` = 1 and 2, side by side in one run.

The workload is the CPU testbed on the Ray layout, ``signalling_at_grpo_l2_ray`` (2 environment
workers, 1 HF engine actor, 2 gloo learner ranks, tiny model): with ``k ≥ 1`` the driver's producer
thread keeps the engine and the environment workers busy with the next steps' rollouts while the
learner ranks update. ``--local`` adds the single-process layout (the producer's HF engine in a
thread beside the learner, one interpreter: the GIL and two torch threads on the machine's cores).

For each row: wall time per training step over ``--steps`` steps after a warm-up step (no
evaluation or checkpoint in between), samples (training records) per second, the speed-up over
the synchronous row of the same layout, and — from the synchronous row — the time of the rollout
side (generate + environments) and of the learner side (log-probs + update + push): overlapping
them can at best bring a step from their sum down to their maximum, the "bound" column.

    python benchmarks/async_training.py                 # Ray layout, 6 steps per row
    python benchmarks/async_training.py --local --steps 8
    python benchmarks/async_training.py --override rollout.max_new_tokens=6 --tag balanced   # longer generation
    python benchmarks/async_training.py --no-ray --local-config reasoner_tool_smollm2_cpu \
        --resume-from runs/reasoner_tool_smollm2_cpu --resume-step 4 --steps 4    # the real model, balanced

Outputs: a table and ``benchmarks/results/async_training[_TAG].{json,md}``. Quote ratios to the
synchronous row of the same run; on a shared machine say under what load it ran (the JSON keeps
the load averages before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS_DIR = ROOT / "benchmarks" / "results"
ROLLOUT_SIDE = ("generate_s", "env_s")
LEARNER_SIDE = ("logprob_s", "advantage_s", "update_s", "push_s")


def resume_checkpoint(run_dir: Path, step: int | None) -> Path:
    """The checkpoint of ``run_dir`` that ``--resume-from`` starts each row at: ``step``'s, or the latest."""
    from llm_trainers.checkpoint import latest_checkpoint

    ckpt = latest_checkpoint(run_dir / "checkpoints") if step is None else \
        run_dir / "checkpoints" / f"step_{step:08d}"  # checkpoints are named step_<8 digits>
    if ckpt is None or not ckpt.is_dir():
        which = "no checkpoint" if step is None else f"no checkpoint of step {step}"
        raise SystemExit(f"--resume-from: {which} under {run_dir / 'checkpoints'}")
    return ckpt


def time_run(config: str, overrides: list[str], staleness: int, steps: int,
             resume_from: Path | None = None) -> dict[str, Any]:
    """Wall seconds per step over ``steps`` steps after one warm-up step, and per-step figures.

    With ``resume_from`` (a checkpoint directory) every row starts from that checkpoint —
    a trained policy, whose groups rarely all score alike, so that every row updates on every
    step — and continues it on the same seeds.
    """
    import torch

    from llm_trainers import make_trainer
    from llm_trainers.config import load_config

    torch.set_num_threads(1)
    out = Path(tempfile.mkdtemp(prefix="async-bench-"))
    start = 0
    if resume_from is not None:
        start = int(resume_from.name.removeprefix("step_"))
        shutil.copytree(resume_from, out / "checkpoints" / resume_from.name)
        (out / "checkpoints" / "latest").write_text(resume_from.name + "\n")
    cfg = load_config(config, [*overrides, f"run.steps={start + steps + 1}", "run.eval_every=-1", "run.save_every=-1",
                               "run.eval_at_start=false", "run.export_final=false", "run.progress=false",
                               "run.tensorboard=false", f"run.output_dir={out}",
                               f"rollout.async={{max_staleness: {staleness}, "
                               f"correction: {'tis' if staleness else 'none'}}}"])
    t0 = time.perf_counter()
    trainer = make_trainer(cfg, resume=resume_from is not None)
    startup = time.perf_counter() - t0
    try:
        trainer.train(until_step=start + 1)  # warm-up: the first rollout has nothing to overlap with
        t0 = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - t0
    finally:
        trainer.close()
    rows = [row for line in (out / "metrics.jsonl").read_text().splitlines()
            if (row := json.loads(line)).get("step", 0) > start + 1 and "time/step_s" in row]
    shutil.rmtree(out, ignore_errors=True)

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in rows) / len(rows)

    samples = sum(r["rollout/trained_records"] for r in rows)
    return {
        "startup_s": startup, "step_s": wall / len(rows), "samples_per_s": samples / wall,
        "rollout_side_s": sum(mean(f"time/{p}") for p in ROLLOUT_SIDE),
        "learner_side_s": sum(mean(f"time/{p}") for p in LEARNER_SIDE),
        "learner_wait_s": mean("async/learner_wait_s"), "producer_blocked_s": mean("async/producer_blocked_s"),
        "staleness_mean": mean("async/staleness_mean"), "staleness_max": max(r.get("async/staleness_max", 0.0)
                                                                              for r in rows),
        "eval_free_success": mean("rollout/success"),
        "phases_s": {p: mean(f"time/{p}") for p in (*ROLLOUT_SIDE, *LEARNER_SIDE)},
        "generated_tokens": mean("tokens/generated"), "trained_tokens": mean("tokens/trained"),
        # a step whose groups all scored alike runs no update: rows that differ here did different work
        "updated_steps": sum(r["rollout/trained_records"] > 0 for r in rows), "timed_steps": len(rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="signalling_at_grpo_l2_ray", help="the Ray-layout config")
    parser.add_argument("--local-config", default="signalling_at_grpo_l2", help="the single-process config (--local)")
    parser.add_argument("--override", action="append", default=[], help="key=value for every row")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per row (after a warm-up step)")
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--local", action="store_true", help="also the single-process layout")
    parser.add_argument("--no-ray", action="store_true", help="only the single-process layout")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the rows, interleaved; the median stands")
    parser.add_argument("--resume-from", type=Path, metavar="RUN_DIR",
                        help="start every row from this run's latest checkpoint (a trained policy)")
    parser.add_argument("--resume-step", type=int, help="with --resume-from: that step's checkpoint")
    parser.add_argument("--tag", default="", help="results go to async_training[_TAG].{json,md}")
    args = parser.parse_args(argv)
    resume = None if args.resume_from is None else resume_checkpoint(args.resume_from, args.resume_step)
    load_before = os.getloadavg()
    layouts = ([] if args.no_ray else [("ray", args.config)]) + ([("local", args.local_config)]
                                                                 if args.local or args.no_ray else [])
    rows: list[dict[str, Any]] = []
    for layout, config in layouts:
        runs: dict[int, list[dict[str, Any]]] = {k: [] for k in args.staleness}
        for round_ in range(args.rounds):  # rounds interleave the rows: a load change hits them all
            for k in args.staleness:
                runs[k].append(time_run(config, args.override, k, args.steps, resume))
                print(f"{layout} round {round_ + 1} k={k}: {runs[k][-1]['step_s']:.2f} s/step", flush=True)
        base = None
        for k in args.staleness:
            # the round with the median step time stands for the row
            row = {"layout": layout, "config": config, "max_staleness": k,
                   **sorted(runs[k], key=lambda r: r["step_s"])[len(runs[k]) // 2],
                   "step_s_rounds": [r["step_s"] for r in runs[k]]}
            base = base or row
            row["speedup"] = base["step_s"] / row["step_s"]
            row["bound"] = (base["rollout_side_s"] + base["learner_side_s"]) / max(base["rollout_side_s"],
                                                                                  base["learner_side_s"])
            rows.append(row)
            print(f"{layout} k={k}: {row['step_s']:.2f} s/step, {row['samples_per_s']:.1f} samples/s, "
                  f"{row['speedup']:.2f}x", flush=True)
    load_after = os.getloadavg()
    table = _table(rows)
    print("\n" + table)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "steps": args.steps, "rounds": args.rounds, "overrides": args.override,
            "resume_from": str(resume) if resume else None, "load_average_before": load_before,
            "load_average_after": load_after}
    stem = "async_training" + (f"_{args.tag}" if args.tag else "")
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    (RESULTS_DIR / f"{stem}.md").write_text(
        table + f"\n\nLoad average (1, 5, 15 min) before: {', '.join(f'{x:.1f}' for x in load_before)}; "
        f"after: {', '.join(f'{x:.1f}' for x in load_after)}; {os.cpu_count()} CPUs.\n")
    return 0


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("| layout | max_staleness | s/step (rounds) | samples/s | vs synchronous | bound | rollout side s | "
            "learner side s | learner waits s | staleness mean/max | steps with an update | start-up s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        spread = "/".join(f"{x:.2f}" for x in r["step_s_rounds"])
        lines.append(f"| {r['layout']} | {r['max_staleness']} | {r['step_s']:.2f} ({spread}) | {r['samples_per_s']:.1f} | "
                     f"{r['speedup']:.2f}x | {r['bound']:.2f}x | {r['rollout_side_s']:.2f} | "
                     f"{r['learner_side_s']:.2f} | {r['learner_wait_s']:.2f} | "
                     f"{r['staleness_mean']:.2f}/{r['staleness_max']:.0f} | {r['updated_steps']}/{r['timed_steps']} | "
                     f"{r['startup_s']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
