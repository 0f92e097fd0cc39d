"""Time one training step, broken into its phases, for the bundled trainers.

    python benchmarks/train_step.py            # CPU cases (tiny random model on Signalling-v0)
    python benchmarks/train_step.py --quick    # fewer steps and episodes
    python benchmarks/train_step.py --scoring-pass   # each CPU case also with log π_old scored in a pass of its own
    python benchmarks/train_step.py --gpu      # also a real-size model (Qwen3-1.7B shape, random weights) on CUDA
    python benchmarks/train_step.py --gpu --gpu-only --gpu-8b   # the CUDA cases only, plus one L1 step of Qwen3-8B's shape

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

On CUDA each phase is also set against the card's limits, measured at the start of the run (a
device-to-device copy for memory bandwidth, an 8192³ bf16 matrix product for dense math):

* generation: weight bytes × decode steps per second (every decode step of a batch reads all the
  weights once; a forward pass of the decoder during sampling is one step), against the bandwidth;
* update: 6 · parameters · tokens through the model (prompt and completion, padding excluded) per
  second, against the matrix-product rate. Gradient checkpointing recomputes the forward (8 · N · T
  of work done) and LoRA skips the frozen weights' gradients (4 · N · T needed): 6 · N · T is the
  usual model-FLOPs convention, not the work done.
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

#: Qwen3-1.7B's and Qwen3-8B's shapes (their config.json: layers, hidden, GQA heads, FFN, tied
#: embeddings, a 151,936-token vocabulary) as Qwen3 models with random weights: for speed only. The
#: tokenizer is a word-level one trained on Signalling's texts, padded with filler words to the
#: vocabulary size, so sampled ids decode.
GPU_SHAPES = {
    "qwen3_1p7b": {"hidden_size": 2048, "num_layers": 28, "num_heads": 16, "num_kv_heads": 8,
                   "intermediate_size": 6144, "max_position_embeddings": 4096, "tie_word_embeddings": True},
    "qwen3_8b": {"hidden_size": 4096, "num_layers": 36, "num_heads": 32, "num_kv_heads": 8,
                 "intermediate_size": 12288, "max_position_embeddings": 4096, "tie_word_embeddings": False},
    # Two small layers with the real vocabulary: to check this script on a CPU (--gpu-device cpu).
    "script_check": {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
                     "intermediate_size": 128, "max_position_embeddings": 1024, "tie_word_embeddings": True},
}
QWEN3_VOCAB = 151936


def build_gpu_model(path: str, shape: str, device: str | None = None) -> str:
    """A random-weight Qwen3 model of ``GPU_SHAPES[shape]``, drawn on ``device``, saved in bf16 at ``path``."""
    from llm_trainers.tiny import build_tiny_model, env_corpus

    build_tiny_model(path, env_corpus("llm/Signalling-v0", episodes=50), arch="qwen3", vocab_size=QWEN3_VOCAB,
                     dtype="bfloat16", device=device, **GPU_SHAPES[shape])
    return path


def measure_card() -> dict:
    """The CUDA card's memory bandwidth and bf16 matrix-product rate, measured here.

    Bandwidth counts the bytes read and written by a device-to-device copy of 4 GiB; the rate is
    2·8192³ floating-point operations per 8192×8192×8192 bf16 product of random matrices. Each is
    the mean of ten timed runs after three warm-ups.
    """
    import torch

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000 / 10

    def copy_rate() -> float:
        src = torch.empty(2**31, dtype=torch.uint16, device="cuda")  # 4 GiB
        dst = torch.empty_like(src)
        return 2 * src.numel() * src.element_size() / timed(lambda: dst.copy_(src))

    def matmul_rate() -> float:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        return 2 * 8192**3 / timed(lambda: a @ b)

    bandwidth, flops = copy_rate(), matmul_rate()
    torch.cuda.empty_cache()
    return {"name": torch.cuda.get_device_name(0), "bandwidth_bytes_s": bandwidth, "bf16_flop_s": flops,
            "memory_gib": torch.cuda.get_device_properties(0).total_memory / 2**30}


class _ForwardCounter:
    """Counts the decoder's forward passes during sampling (decode steps, the prefill included)
    and the tokens of every other pass (the learner's scoring and update passes, padding excluded)."""

    def __init__(self, trainer) -> None:
        self.sampling = False
        self.decode_steps = 0
        self.train_tokens = 0
        self.score_tokens = 0
        seen: set[int] = set()
        for pol in trainer.policies:
            base = pol.model.get_base_model() if hasattr(pol.model, "get_base_model") else pol.model
            decoder = getattr(base, "model", base)
            if id(decoder) not in seen:
                seen.add(id(decoder))
                decoder.register_forward_pre_hook(self._hook, with_kwargs=True)
        engine_generate = trainer.engine.generate

        def generate(*args, **kwargs):
            self.sampling = True
            try:
                return engine_generate(*args, **kwargs)
            finally:
                self.sampling = False

        trainer.engine.generate = generate

    def _hook(self, module, args, kwargs) -> None:
        import torch

        if self.sampling:
            self.decode_steps += 1
            return
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids", args[0] if args else None)
        tokens = int(mask.sum()) if mask is not None else (ids.numel() if ids is not None else 0)
        if torch.is_grad_enabled():
            self.train_tokens += tokens
        else:
            self.score_tokens += tokens


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
        cuda = cfg.model.device.startswith("cuda")
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        counter = _ForwardCounter(trainer) if model_dir else None  # the real-size cases
        rows = [trainer.train_step() for _ in range(steps)]
        base_model = next(iter(trainer.policies)).model
        base_model = base_model.get_base_model() if hasattr(base_model, "get_base_model") else base_model
        weights = [p for n, p in base_model.named_parameters() if "lora_" not in n]  # the base model's
        params = sum(p.numel() for p in weights)
        weight_bytes = sum(p.numel() * p.element_size() for p in weights)
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
        "params": params,
        "weight_bytes": weight_bytes,
        "overrides": overrides,
    }
    if counter is not None:
        total = lambda key: sum(r.get(key, 0.0) for r in rows)  # noqa: E731
        result.update({
            "decode_steps_per_step": counter.decode_steps / steps,
            "update_tokens_per_step": counter.train_tokens / steps,
            "scoring_tokens_per_step": counter.score_tokens / steps,
            # Weight bytes read per second of sampling, and model FLOPs per second of update.
            "generate_bytes_s": weight_bytes * counter.decode_steps / max(total("time/generate_s"), 1e-9),
            "update_flop_s": 6 * params * counter.train_tokens / max(total("time/update_s"), 1e-9),
        })
    Path(out_json).write_text(json.dumps(result))


def _write(out: Path, meta: dict, results: list[dict], steps: int, card: dict | None) -> list[dict]:
    """Print the table of the cases so far and write train_step.{json,md}; return the good cases."""
    ok = [r for r in results if "error" not in r]
    meta = {**meta, "load_average": os.getloadavg()}
    table = _table(ok)
    if card:
        table += "\n\nAgainst the card's measured limits:\n\n" + _roofline_table(ok, card)
    print(table, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_step.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (out / "train_step.md").write_text(
        "# Training step time by phase\n\n"
        f"Setup: {json.dumps(meta)}\n\nTimes are seconds per training step (mean of {steps} after one warm-up).\n\n"
        + table + "\n"
    )
    return ok


def _roofline_table(results: list[dict], card: dict) -> str:
    """Each CUDA case's sampling and update rates against the card's measured limits."""
    head = ("| case | params | decode steps / step | weight GB/s while sampling | × bandwidth | update tokens / step "
            "| model TFLOP/s in update | × bf16 rate |")
    lines = [head, "|" + "---|" * 8]
    for r in results:
        if "generate_bytes_s" not in r:
            continue
        lines.append(
            f"| {r['case']} | {r['params'] / 1e9:.2f} B | {r['decode_steps_per_step']:.0f} "
            f"| {r['generate_bytes_s'] / 1e9:.0f} | {r['generate_bytes_s'] / card['bandwidth_bytes_s']:.3f} "
            f"| {r['update_tokens_per_step']:.0f} | {r['update_flop_s'] / 1e12:.0f} "
            f"| {r['update_flop_s'] / card['bf16_flop_s']:.3f} |"
        )
    return "\n".join(lines)


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
    p.add_argument("--gpu", action="store_true", help="add real-size cases (Qwen3-1.7B shape, random weights) on CUDA")
    p.add_argument("--gpu-only", action="store_true", help="with --gpu: skip the CPU cases")
    p.add_argument("--gpu-8b", action="store_true", help="with --gpu: also one L1 case of Qwen3-8B's shape")
    p.add_argument("--gpu-model-dir", help="with --gpu: build (or reuse) the 1.7B-shape model here and keep it")
    p.add_argument("--gpu-shape", default="qwen3_1p7b", choices=sorted(GPU_SHAPES),
                   help="with --gpu: the shape of the L1/L2 cases")
    p.add_argument("--gpu-device", default="cuda", help="with --gpu: their device (cpu only to check this script)")
    p.add_argument("--case-timeout", type=float, default=None, help="seconds before a case is stopped")
    p.add_argument("--cases", nargs="*", default=None, help="subset of the CPU cases")
    p.add_argument("--scoring-pass", action="store_true",
                   help="also run each CPU case with algorithm.old_logprobs_from_update=false (log π_old in a "
                        "scoring pass of its own), side by side")
    p.add_argument("--model", default="tiny:llm/Signalling-v0",
                   help="model of the CPU cases (default: the tiny random one; e.g. smollm2)")
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
              f"model.path={args.model}", "train.micro_batch_size=64", "train.lr=1e-3"]
    cases: list[tuple[str, list[str], str | None]] = []
    if not (args.gpu and args.gpu_only):
        for name, ov in CPU_CASES.items():
            if args.cases is None or name in args.cases:
                cases.append((f"cpu/{name}", [*common, *ov], None))
                if args.scoring_pass:
                    cases.append((f"cpu/{name}/scoring-pass", [*common, *ov, "algorithm.old_logprobs_from_update=false"],
                                  None))
    card = None
    if args.gpu:
        import torch

        on_cuda = args.gpu_device.startswith("cuda")
        if on_cuda and not torch.cuda.is_available():
            print("--gpu: no CUDA device; skipping the GPU cases", file=sys.stderr)
        else:
            if on_cuda:
                card = measure_card()
                print(f"{card['name']}: {card['bandwidth_bytes_s'] / 1e12:.2f} TB/s copy, "
                      f"{card['bf16_flop_s'] / 1e12:.0f} TFLOP/s bf16 matmul", file=sys.stderr, flush=True)
            models = {}
            shapes = [args.gpu_shape] + (["qwen3_8b"] if args.gpu_8b else [])
            for shape in dict.fromkeys(shapes):
                if shape == args.gpu_shape and args.gpu_model_dir:
                    path = args.gpu_model_dir
                else:
                    path = tempfile.mkdtemp(prefix=f"bench_{shape}_")
                if not (Path(path) / "config.json").exists():
                    t0 = time.perf_counter()
                    build_gpu_model(path, shape, device="cuda" if on_cuda else None)
                    print(f"built {shape} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
                models[shape] = path
            gpu_common = [f"env.num_envs={envs * 4}", f"rollout.max_new_tokens={args.max_new_tokens * 8}",
                          f"model.device={args.gpu_device}", "model.dtype=bfloat16", "train.bf16=true",
                          "model.gradient_checkpointing=true", "train.micro_batch_size=16", "train.lr=1e-6",
                          # Random weights earn the same (format-error) reward in every group, so
                          # every advantage is 0 and the trainer would skip the update; an entropy
                          # term keeps every record in it, as a trained model's mixed groups would.
                          "train.entropy_coef=0.001"]
            have_vllm = False
            try:
                import vllm  # noqa: F401

                have_vllm = on_cuda
            except Exception as exc:  # noqa: BLE001
                print(f"vLLM unavailable ({exc}); GPU cases use the HF engine only", file=sys.stderr)
            runs = [(args.gpu_shape, "at_grpo_L1_tree_k4"), (args.gpu_shape, "at_grpo_L2_tree_k4")]
            if args.gpu_8b:
                runs.append(("qwen3_8b", "at_grpo_L1_tree_k4"))
            for shape, name in runs:
                ov = [o for o in CPU_CASES[name] if not o.startswith("model.lora")]
                if "L2" in name:
                    ov.append("model.lora={r: 16, alpha: 32, target_modules: all-linear}")
                device = "cuda" if on_cuda else args.gpu_device
                cases.append((f"{device}/{shape}/{name}/hf", [*gpu_common, *ov], models[shape]))
                if have_vllm:
                    cases.append((f"{device}/{shape}/{name}/vllm", [*gpu_common, *ov, "rollout.engine=vllm"],
                                  models[shape]))

    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "quick": args.quick,
        "steps": steps,
        "envs": envs,
        "max_new_tokens": args.max_new_tokens,
        "card": card,
    }
    results: list[dict] = []
    ok: list[dict] = []
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
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=args.case_timeout)
        except subprocess.TimeoutExpired:
            results.append({"case": name, "error": f"stopped after --case-timeout {args.case_timeout:.0f} s"})
        else:
            if proc.returncode != 0:
                print(proc.stderr[-4000:], file=sys.stderr)
                results.append({"case": name,
                                "error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"})
            else:
                results.append(json.loads(Path(out_json).read_text()))
                os.unlink(out_json)
        ok = _write(Path(args.out), meta, results, steps, card)  # after every case: a cut run keeps its cases
    for r in results:
        if "error" in r:
            print(f"{r['case']}: FAILED: {r['error']}")
    return 0 if cases and len(ok) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
