"""The Stronger-MAS ablation, in small, on a CPU: AT-GRPO tree groups vs flat GRPO groups vs one
shared policy, with the same budget, over several run seeds.

On the two-agent signalling game (``llm/Signalling-v0``) with a tiny random-weight model (or any
model path), each variant trains for the same number of steps and samples the same number of
actions per decision and step:

* ``tree``  — AT-GRPO: L2 (one LoRA adapter per agent), tree sampling, ``K`` candidates per
  decision on ``E`` environments; groups are the ``K`` candidates of one decision.
* ``flat``  — GRPO groups without the tree: L2, flat sampling of ``K`` episodes per problem on
  ``K·E`` environments; a group is the ``K`` episodes' records of the same agent and turn, and
  the advantage is the reward minus its group's mean, normalised over the batch
  (``reinforce_pp_baseline``: ``at_grpo`` groups the candidates of one decision, so needs the tree).
* ``shared`` — one policy for both agents (L1), tree sampling as ``tree`` (Stronger-MAS's
  "single agent" plays the whole task alone; signalling has no one-agent form, so the ablation
  here is role-specialised adapters against one shared policy).

Each run evaluates on the same held-out seeds at the end (greedy); the table gives the mean and
the spread (standard deviation, min–max) over run seeds, and the JSON every run's figures::

    python benchmarks/at_grpo_ablation.py --seeds 0 1 2 --steps 30 --envs 16 --k 4
    python benchmarks/at_grpo_ablation.py --variants tree flat --out benchmarks/results/at_grpo_ablation
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

LORA = "model.lora={r: 8, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head]}"


def variant_overrides(variant: str, envs: int, k: int) -> list[str]:
    """The config overrides of one variant (same steps, same samples per decision and step)."""
    if variant == "tree":
        return ["model.level=L2", LORA, "rollout.tree=true", f"rollout.k={k}", f"env.num_envs={envs}",
                "algorithm.estimator=at_grpo"]
    if variant == "flat":
        return ["model.level=L2", LORA, "rollout.tree=false", f"env.samples_per_problem={k}",
                f"env.num_envs={envs * k}", "algorithm.estimator=reinforce_pp_baseline"]
    if variant == "shared":
        return ["model.level=L1", LORA, "rollout.tree=true", f"rollout.k={k}", f"env.num_envs={envs}",
                "algorithm.estimator=at_grpo"]
    raise ValueError(f"unknown variant {variant!r}; known: tree, flat, shared")


def run_one(variant: str, seed: int, args: argparse.Namespace, root: Path) -> dict[str, float]:
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    out = root / f"{variant}_seed{seed}"
    cfg = load_config(None, [
        "env.id=llm/Signalling-v0", f"model.path={args.model}", "model.device=cpu",
        "rollout.max_new_tokens=1", "rollout.eval_temperature=0",
        f"run.seed={seed}", f"run.steps={args.steps}", "run.eval_every=0", "run.eval_at_start=true",
        f"run.eval_episodes={args.eval_episodes}", "run.save_every=-1", "run.export_final=false",
        "run.progress=false", "run.tensorboard=false", f"run.threads={args.threads}", f"run.output_dir={out}",
        f"train.lr={args.lr}", "train.micro_batch_size=64", "env.kwargs={listener_local_weight: 1.0}",
        *variant_overrides(variant, args.envs, args.k),
    ])
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    try:
        final = trainer.train()
    finally:
        trainer.close()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"variant": variant, "seed": seed, "start_success": rows[0].get("eval/success", float("nan")),
            "final_success": final.get("eval/success", float("nan")), "wall_s": time.perf_counter() - t0}


def table(results: list[dict[str, float]]) -> str:
    lines = ["| variant | runs | final success mean | std | min | max | start mean | wall s / run |",
             "|---|---|---|---|---|---|---|---|"]
    for variant in dict.fromkeys(r["variant"] for r in results):
        rs = [r for r in results if r["variant"] == variant]
        finals = [r["final_success"] for r in rs]
        std = statistics.stdev(finals) if len(finals) > 1 else 0.0
        lines.append(f"| {variant} | {len(rs)} | {statistics.mean(finals):.3f} | {std:.3f} | {min(finals):.3f} | "
                     f"{max(finals):.3f} | {statistics.mean(r['start_success'] for r in rs):.3f} | "
                     f"{statistics.mean(r['wall_s'] for r in rs):.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", nargs="+", default=["tree", "flat", "shared"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--envs", type=int, default=16, help="environments per step of the tree variants (flat: envs × k)")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-episodes", type=int, default=64)
    p.add_argument("--model", default="tiny:llm/Signalling-v0")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = p.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for variant in args.variants:
                results.append(run_one(variant, seed, args, Path(tmp)))
                print(json.dumps(results[-1]), flush=True)
    text = table(results)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{args.out}.json").write_text(json.dumps({"args": vars(args), "runs": results}, indent=2))
        Path(f"{args.out}.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
