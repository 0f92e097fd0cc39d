"""Time one training step, broken into its phases, for the bundled trainers.

    python benchmarks/train_step.py            # CPU cases (tiny random model on Signalling-v0)
    python benchmarks/train_step.py --quick    # fewer steps and episodes
    python benchmarks/train_step.py --gpu      # also a real-size model (Qwen3-1.7B shape, random weights) on CUDA

Each case runs in its own process (so peak memory is per case): one warm-up step, then the mean
over ``--steps`` measured steps of

* ``generate``  — sampling (the rollout engine's time),
* ``env``       — stepping environments, and in tree sampling cloning and scoring the K candidates,
* ``logprobs``  — the learner's scoring passes (log π_old recomputed; log π_ref when a KL term is on),
* ``advantage`` — the advantage estimator,
* ``update``    — forward/backward/optimizer over the step's records,
* ``push``      — making the new weights visible to the engine (0 for the in-process HF engine;
  adapter or weight transfer for vLLM),

plus generated and trained tokens per second, and peak memory (process RSS; CUDA peak allocated
on GPU). Prints a Markdown table and writes ``benchmarks/results/train_step.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

LORA = "model.lora={r: 8, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head]}"

CPU_CASES = {
    "at_grpo_L1_tree_k4": ["algorithm.estimator=at_grpo", "rollout.tree=true", "rollout.k=4", "model.level=L1"],
    "at_grpo_L2_tree_k4": ["algorithm.estimator=at_grpo", "rollout.tree=true", "rollout.k=4", "model.level=L2", LORA],
    "at_grpo_L3_tree_k4": ["algorithm.estimator=at_grpo", "rollout.tree=true", "rollout.k=4", "model.level=L3"],
    "reinforce_pp_L1_flat_kl": ["algorithm.estimator=reinforce_pp", "rollout.tree=false", "model.level=L1",
                                "algorithm.kl_coef=0.01"],
}

#: Qwen3-1.7B's shape (28 layers, hidden 2048, GQA 16/8, FFN 6144); the vocabulary is the local
#: tokenizer's, so sampled ids decode. Random weights: for speed only.
GPU_SHAPE = {"hidden_size": 2048, "num_layers": 28, "num_heads": 16, "num_kv_heads": 8, "intermediate_size": 6144,
             "max_position_embeddings": 4096}


def _run_case(name: str, overrides: list[str], steps: int, out_json: str, model_dir: str | None) -> None:
    import torch
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        base = [f"run.output_dir={tmp}", "run.progress=false", "run.tensorboard=false", "run.eval_every=-1",
                "run.save_every=-1", "run.export_final=false", f"run.steps={steps + 1}"]
        if model_dir:
            base.append(f"model.path={model_dir}")
        cfg = load_config(None, [*base, *overrides])
        t0 = time.perf_counter()
        trainer = Trainer(cfg)
        setup_s = time.perf_counter() - t0
        trainer.train_step()  # warm-up
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        rows = [trainer.train_step() for _ in range(steps)]
        trainer.close()

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in rows) / len(rows)

    result = {
        "case": name,
        "device": cfg.model.device,
        "setup_s": setup_s,
        "steps": steps,
        "generate_s": mean("time/generate_s"),
        "env_s": mean("time/env_s"),
        "logprobs_s": mean("time/logprob_s"),
        "advantage_s": mean("time/advantage_s"),
        "update_s": mean("time/update_s"),
        "push_s": mean("time/push_s"),
        "step_s": mean("time/step_s"),
        "generated_tokens": mean("tokens/generated"),
        "trained_tokens": mean("tokens/trained"),
        "generated_tok_s": mean("tokens/generated") / max(mean("time/generate_s"), 1e-9),
        "trained_tok_s": mean("tokens/trained") / max(mean("time/update_s"), 1e-9),
        "records": mean("rollout/trained_records"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "peak_cuda_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None,
        "torch_threads": torch.get_num_threads(),
        "overrides": overrides,
    }
    Path(out_json).write_text(json.dumps(result))


def _table(results: list[dict]) -> str:
    head = ("| case | step s | generate | env | logprobs | advantage | update | push | gen tok/s | train tok/s "
            "| records | peak RSS MB | peak CUDA MB |")
    lines = [head, "|" + "---|" * 13]
    for r in results:
        cuda = f"{r['peak_cuda_mb']:.0f}" if r.get("peak_cuda_mb") else "-"
        lines.append(
            f"| {r['case']} | {r['step_s']:.3f} | {r['generate_s']:.3f} | {r['env_s']:.3f} | {r['logprobs_s']:.3f} "
            f"| {r['advantage_s']:.4f} | {r['update_s']:.3f} | {r['push_s']:.4f} | {r['generated_tok_s']:.0f} "
            f"| {r['trained_tok_s']:.0f} | {r['records']:.0f} | {r['peak_rss_mb']:.0f} | {cuda} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 measured steps, 16 environments")
    p.add_argument("--steps", type=int, default=None, help="measured steps per case (default 5, quick 2)")
    p.add_argument("--envs", type=int, default=None, help="environments per step (default 32, quick 16)")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--gpu", action="store_true", help="add a real-size (Qwen3-1.7B shape) model on CUDA")
    p.add_argument("--cases", nargs="*", default=None, help="subset of the CPU cases")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--_case", help=argparse.SUPPRESS)
    p.add_argument("--_json", help=argparse.SUPPRESS)
    p.add_argument("--_model", help=argparse.SUPPRESS)
    p.add_argument("--_overrides", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    steps = args.steps or (2 if args.quick else 5)
    envs = args.envs or (16 if args.quick else 32)

    if args._case:  # child process
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        _run_case(args._case, json.loads(args._overrides), steps, args._json, args._model)
        return 0

    common = [f"env.num_envs={envs}", f"rollout.max_new_tokens={args.max_new_tokens}", "model.device=cpu",
              "model.path=tiny:llm/Signalling-v0", "train.micro_batch_size=64", "train.lr=1e-3"]
    cases: list[tuple[str, list[str], str | None]] = []
    for name, ov in CPU_CASES.items():
        if args.cases is None or name in args.cases:
            cases.append((f"cpu/{name}", [*common, *ov], None))
    gpu_model = None
    if args.gpu:
        import torch

        if not torch.cuda.is_available():
            print("--gpu: no CUDA device; skipping the GPU cases", file=sys.stderr)
        else:
            from llm_trainers.tiny import build_tiny_model, env_corpus

            gpu_model = tempfile.mkdtemp(prefix="bench_qwen3_1p7b_")
            build_tiny_model(gpu_model, env_corpus("llm/Signalling-v0", episodes=50), **GPU_SHAPE)
            gpu_common = [f"env.num_envs={envs * 4}", f"rollout.max_new_tokens={args.max_new_tokens * 8}",
                          "model.device=cuda", "model.dtype=bfloat16", "train.bf16=true",
                          "model.gradient_checkpointing=true", "train.micro_batch_size=16", "train.lr=1e-6"]
            for name in ("at_grpo_L1_tree_k4", "at_grpo_L2_tree_k4"):
                ov = [o for o in CPU_CASES[name] if not o.startswith("model.lora")]
                if "L2" in name:
                    ov.append("model.lora={r: 16, alpha: 32, target_modules: all-linear}")
                cases.append((f"cuda/{name}/hf", [*gpu_common, *ov], gpu_model))
                try:
                    import vllm  # noqa: F401

                    cases.append((f"cuda/{name}/vllm", [*gpu_common, *ov, "rollout.engine=vllm"], gpu_model))
                except Exception as exc:  # noqa: BLE001
                    print(f"vLLM unavailable ({exc}); GPU cases use the HF engine only", file=sys.stderr)

    results = []
    for name, overrides, model in cases:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out_json = f.name
        cmd = [sys.executable, __file__, "--_case", name, "--_json", out_json, "--_overrides", json.dumps(overrides),
               "--steps", str(steps)]
        if model:
            cmd += ["--_model", model]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        print(f"running {name} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            results.append({"case": name, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"})
            continue
        results.append(json.loads(Path(out_json).read_text()))
        os.unlink(out_json)

    ok = [r for r in results if "error" not in r]
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "quick": args.quick,
        "steps": steps,
        "envs": envs,
        "max_new_tokens": args.max_new_tokens,
    }
    table = _table(ok)
    print(table)
    for r in results:
        if "error" in r:
            print(f"{r['case']}: FAILED: {r['error']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_step.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (out / "train_step.md").write_text(
        "# Training step time by phase\n\n"
        f"Setup: {json.dumps(meta)}\n\nTimes are seconds per training step (mean of {steps} after one warm-up).\n\n"
        + table + "\n"
    )
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
