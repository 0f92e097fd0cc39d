"""vLLM against the HF engine on SmolLM2-135M-Instruct, side by side in one run (issue 33).

    .venv-vllm/bin/python benchmarks/vllm_engine.py            # make bench-vllm
    .venv-vllm/bin/python benchmarks/vllm_engine.py --quick

Both engines run in the ``.venv-vllm`` interpreter (the same torch), each case in its own process
(so start-up and peak memory are the case's own), one torch thread, float32, on the same prompts
and model (``smollm2``):

* **generate** — ``--prompts`` prompts (the speaker's and the listener's observations of
  ``llm/Signalling-v0`` episodes and a few questions), ``--samples`` samples each at temperature
  1, at most ``--new-tokens`` tokens: wall seconds, process CPU seconds (user + system, all
  threads), generated tokens, tokens per second and CPU seconds per token. The HF engine is
  :class:`~llm_trainers.agents.hf.HFEngine` (its continuous batching, ``max_batch_size`` 64), the
  vLLM engine :class:`~llm_trainers.agents.vllm.VLLMEngine` (CPU build, in process, eager,
  1 GiB KV cache).
* **generate with an adapter** (``hf+lora``, ``vllm+lora``, ``vllm+merged``) — the same, the
  policy a LoRA adapter (r 8 on every linear layer, as the SmolLM2 training configs, moved off
  the base model) served as one: peft modules in the HF engine, ``enable_lora`` and a
  ``LoRARequest`` in vLLM (``lora_serving: adapter``); or merged into vLLM's weights
  (``lora_serving: merged``, the CPU build's default).
* **start** — seconds from nothing to an engine ready to sample (policies loaded, and for vLLM the
  engine started), and peak RSS of the process at the end of the case.
* **train step** — the shipped ``signalling_smollm2_cpu`` config (AT-GRPO, LoRA r 8 on every
  linear layer, 8 environments × K 4) with ``rollout.engine`` hf or vllm (``vllm``: the default
  ``lora_serving: auto``, merged on the CPU build; ``vllm+adapter``: vLLM's LoRA): one warm-up
  step, then the mean of ``--steps`` steps, split into generate / update / push.

Outputs: a Markdown table and ``benchmarks/results/vllm_engine.{json,md}``, with the load average
(1, 5, 15 minutes) at the start and end of the run and before and after each case. Compare numbers
of the same run only: the machine's load changes them between runs.
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
QUESTIONS = ["What is the capital of France?", "Name three colours.", "What is 12 times 7?",
             "Write one sentence about the sea."]


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _prompts(count: int) -> list[dict[str, str]]:
    import llm_envs

    out: list[dict[str, str]] = []
    seed = 0
    while len(out) < count:
        env = llm_envs.make("llm/Signalling-v0")
        env.reset(seed=seed)
        for agent in env.possible_agents:
            out.append(env.observe(agent))
            if agent == env.agent_selection:
                env.step(env.reference_action(agent))
        out.append({"instruction": "", "prompt": QUESTIONS[seed % len(QUESTIONS)]})
        seed += 1
    return out[:count]


def _engine(kind: str, adapter_dir: str, lora: str = ""):
    import torch

    from llm_trainers.agents.hf import HFEngine, SamplingParams
    from llm_trainers.policies import LoraSettings, build_policies

    # with ``lora``: the training configs' adapter (r 8 on every linear layer), moved off the base
    # model as a trained one is; ``lora``: served as an adapter (peft in the HF engine, vLLM's LoRA
    # path), ``merged``: merged into the weights of vLLM's engine (``lora_serving: merged``)
    adapter = LoraSettings(r=8, alpha=16, target_modules="all-linear") if lora else None
    policies = build_policies("L1", ["a"], "smollm2", lora=adapter, device="cpu", dtype="float32")
    if lora:
        with torch.no_grad():
            g = torch.Generator().manual_seed(0)
            for name, p in policies["shared"].named_trainable_parameters():
                if ".lora_B." in name:
                    p.add_(torch.randn(p.shape, generator=g) * 1e-3)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=32)  # each call below gives its own
    if kind == "hf":
        return HFEngine(policies, sampling, seed=0, max_batch_size=64)
    from llm_trainers.agents.vllm import VLLMEngine
    from llm_trainers.config import VLLMConfig

    serving = "merged" if lora == "merged" else "adapter"
    return VLLMEngine(policies, sampling, seed=0, settings=VLLMConfig(adapter_dir=adapter_dir, max_model_len=2048,
                                                                      lora_serving=serving))


def _generate_case(case: str, prompts: int, samples: int, new_tokens: int) -> dict:
    import torch

    from llm_trainers.agents.hf import SamplingParams

    kind, _, lora = case.partition("+")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        engine = _engine(kind, tmp, lora=lora)
        start_s = time.perf_counter() - t0
        sampling = SamplingParams(temperature=1.0, max_new_tokens=new_tokens)
        encoded = [engine.encode("shared", obs) for obs in _prompts(prompts)]
        engine.generate("shared", encoded[:2], n=1, sampling=SamplingParams(temperature=1.0, max_new_tokens=4))  # warm-up
        c0, w0 = _cpu_s(), time.perf_counter()
        rows = engine.generate("shared", encoded, n=samples, sampling=sampling)
        wall, cpu = time.perf_counter() - w0, _cpu_s() - c0
        tokens = sum(len(g.token_ids) for row in rows for g in row)
        close = getattr(engine, "close", None)
        if close is not None:
            close()
    return {"case": f"generate/{case}", "engine": case, "start_s": start_s, "wall_s": wall, "cpu_s": cpu,
            "tokens": tokens, "tok_per_s": tokens / wall, "cpu_s_per_token": cpu / max(tokens, 1),
            "prompt_tokens_mean": sum(map(len, encoded)) / len(encoded),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _train_case(case: str, steps: int) -> dict:
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    kind, _, serving = case.partition("+")  # vllm: lora_serving auto (merged on the CPU); vllm+adapter
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config("signalling_smollm2_cpu", [
            f"run.output_dir={tmp}", "run.progress=false", "run.eval_every=-1", "run.eval_at_start=false",
            "run.save_every=-1", "run.export_final=false", f"run.steps={steps + 1}", "run.threads=1",
            f"rollout.engine={kind}", f"rollout.vllm={{adapter_dir: {tmp}/adapters, max_model_len: 2048, "
            f"lora_serving: {serving or 'auto'}}}"])
        t0 = time.perf_counter()
        trainer = Trainer(cfg)
        start_s = time.perf_counter() - t0
        trainer.train_step()  # warm-up
        c0 = _cpu_s()
        rows = [trainer.train_step() for _ in range(steps)]
        cpu = (_cpu_s() - c0) / steps
        trainer.close()

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in rows) / len(rows)

    return {"case": f"train_step/{case}", "engine": case, "start_s": start_s, "steps": steps,
            "step_s": mean("time/step_s"), "step_cpu_s": cpu, "generate_s": mean("time/generate_s"),
            "update_s": mean("time/update_s"), "push_s": mean("time/push_s"),
            "generated_tokens": mean("tokens/generated"), "success": mean("rollout/success"),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _table(results: list[dict]) -> str:
    gen = [r for r in results if r["case"].startswith("generate/")]
    train = [r for r in results if r["case"].startswith("train_step/")]
    lines = ["| engine | start-up s | tokens | wall s | tokens/s | CPU s | CPU s/token | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in gen:
        if "error" in r:
            lines.append(f"| {r['case']} | error: {r['error']} |||||||")
            continue
        lines.append(f"| {r['engine']} | {r['start_s']:.1f} | {r['tokens']} | {r['wall_s']:.1f} | {r['tok_per_s']:.1f} | "
                     f"{r['cpu_s']:.1f} | {r['cpu_s_per_token']:.4f} | {r['peak_rss_mb']:.0f} |")
    if train:
        lines += ["", "| engine (train step) | start-up s | step s | step CPU s | generate s | update s | push s | "
                      "generated tokens | peak RSS MB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in train:
            if "error" in r:
                lines.append(f"| {r['case']} | error: {r['error']} ||||||||")
                continue
            lines.append(f"| {r['engine']} | {r['start_s']:.1f} | {r['step_s']:.1f} | {r['step_cpu_s']:.1f} | "
                         f"{r['generate_s']:.1f} | {r['update_s']:.1f} | {r['push_s']:.2f} | "
                         f"{r['generated_tokens']:.0f} | {r['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="16 prompts x 2 samples, 1 measured train step")
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--no-train", action="store_true", help="generation only")
    p.add_argument("--cases", help="comma-separated subset of the cases, e.g. generate/vllm+lora,generate/vllm+merged")
    p.add_argument("--_case", help=argparse.SUPPRESS)
    p.add_argument("--_json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.prompts, args.samples, args.steps = 16, 2, 1
    if args._case:
        kind, engine = args._case.split("/")
        result = (_generate_case(engine, args.prompts, args.samples, args.new_tokens) if kind == "generate"
                  else _train_case(engine, args.steps))
        Path(args._json).write_text(json.dumps(result))
        return
    cases = ["generate/hf", "generate/vllm", "generate/hf+lora", "generate/vllm+lora", "generate/vllm+merged"]
    cases += [] if args.no_train else ["train_step/hf", "train_step/vllm", "train_step/vllm+adapter"]
    if args.cases:
        cases = [c for c in cases if c in args.cases.split(",")]
    results = []
    load_at_start = os.getloadavg()  # the machine's other work changes every figure: recorded with them
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    for case in cases:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out_json = f.name
        cmd = [sys.executable, __file__, "--_case", case, "--_json", out_json, "--prompts", str(args.prompts),
               "--samples", str(args.samples), "--new-tokens", str(args.new_tokens), "--steps", str(args.steps)]
        print(f"running {case} ...", flush=True)
        load_before = os.getloadavg()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
            results.append({"case": case, "error": tail})
        else:
            results.append(json.loads(Path(out_json).read_text()))
        results[-1].update(load_avg_before=load_before, load_avg_after=os.getloadavg())
        os.unlink(out_json)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_avg_at_start": load_at_start, "load_avg_at_end": os.getloadavg(), "prompts": args.prompts, "samples": args.samples,
            "new_tokens": args.new_tokens, "train_steps": args.steps, "threads": 1, "dtype": "float32"}
    try:
        import torch
        import vllm

        meta.update(torch=torch.__version__, vllm=vllm.__version__)
    except ImportError:
        pass
    table = _table(results)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vllm_engine.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (RESULTS / "vllm_engine.md").write_text(f"Setup: {json.dumps(meta)}\n\n{table}\n")


if __name__ == "__main__":
    main()
